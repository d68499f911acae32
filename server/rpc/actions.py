"""Actions as the requests carry them (PassCards, PlayCard, ChooseMoon, LeaveTable), read
alike on the unary calls and on a Play stream: the method names here, the reading by the
table's game (``GameModule.decode_action``)."""

from __future__ import annotations

METHODS = {"pass_cards": "PassCards", "play_card": "PlayCard", "choose_moon": "ChooseMoon",
           "leave_table": "LeaveTable"}  # PlayRequest's actions, by the unary call's name
