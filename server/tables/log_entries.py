"""What a table writes to its durable log: one frozen dataclass per kind of entry.

Recovery replays these through the table's state machine, so a table after a restart is the
table before it, its history of numbered events included. Each entry carries ``seq``, the
table's event sequence just before the entry was applied; a jump in it is where numbered
events no entry holds were (a seat given up before the game: its join and its leave), which
keep their numbers, and a snapshot that would reach back past them says ``has_gap``. The
entries that begin a step (joins, actions, timeouts, a pause's end) carry ``at``, the step's
time to the millisecond, which its events show, so the rebuilt history shows when it happened.

A table's log grows with its game's moves: joins (at most one live row per seat: a seat
given up before the game starts deletes its join row), actions (players', bots' and
timers'), the pause and deadline times each step computed, and an operator's holds (a
championship paused and resumed: two entries per pause). Connections are not logged:
presence events are not numbered, so the history has no hole where they were.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from server import games
from server.games import GameAction

Action = GameAction  # a game's action: its module writes and reads its JSON form


@dataclass(frozen=True, slots=True)
class Joined:
    """A person took ``seat``. Only the token's SHA-256 is kept; ``sealed_token`` is the
    token encrypted under a key derived from the JoinTable request_id (empty without one),
    so a retry that presents the same request_id gets the same token, after a restart too."""

    seq: int
    seat: int
    name: str
    token_hash: str
    request_key: str = ""
    fingerprint: str = ""
    sealed_token: str = ""
    at: float = 0.0
    """When (seconds since the epoch, to the millisecond); 0 when not kept (older logs)."""
    account_id: str = ""
    """The signed-in account that took the seat ("" for an anonymous person)."""
    address: str = ""
    """An anonymous person's address at a quick-match table, one seat each ("" otherwise)."""
    network: str = ""
    """A signed-in person's network, as a tag of this table (``network_tag``): seats of one
    network do not rate each other (RULES.md, "Rated games"); "" when not known."""


@dataclass(frozen=True, slots=True)
class Acted:
    """An action applied to the game. ``by`` is ``player`` (with its request_id and the
    fingerprint of the request), ``bot``, or ``idle`` (the table ended a game nobody played)."""

    seq: int
    action: Action
    by: str
    request_id: str = ""
    fingerprint: str = ""
    at: float = 0.0
    """When (as ``Joined.at``)."""


@dataclass(frozen=True, slots=True)
class TimedOut:
    """Time ran out: the automatic choice of each seat that still had to act, in order."""

    seq: int
    actions: tuple[Action, ...]
    at: float = 0.0
    """When (as ``Joined.at``)."""
    is_away: bool = False
    """Away seats played at once (their seats are away now); the turn's clock runs on for
    the others."""


@dataclass(frozen=True, slots=True)
class TakenUp:
    """The person at ``seat`` of a quick-match table took up their reservation (opened a
    stream with its token); the game starts once every seat is taken up."""

    seq: int
    seat: int
    at: float = 0.0
    """When (as ``Joined.at``)."""


@dataclass(frozen=True, slots=True)
class PauseStarted:
    seq: int
    until: float


@dataclass(frozen=True, slots=True)
class PauseEnded:
    seq: int
    at: float = 0.0
    """When (as ``Joined.at``)."""


@dataclass(frozen=True, slots=True)
class DeadlineSet:
    seq: int
    at: float


@dataclass(frozen=True, slots=True)
class Removed:
    """An operator took the person at ``seat`` out of a running game: their token is revoked
    and, unless they had left already, the seat leaves (the engine's Leave, so the game's
    record replays)."""

    seq: int
    seat: int
    at: float = 0.0
    """When (as ``Joined.at``)."""


@dataclass(frozen=True, slots=True)
class Held:
    """The table was held (``is_held``: its championship is paused: nobody acts, no clock
    runs) or released (the turn starts again with its whole time)."""

    seq: int
    is_held: bool
    at: float = 0.0
    """When (as ``Joined.at``)."""


Entry = (Joined | Acted | TimedOut | PauseStarted | PauseEnded | DeadlineSet | Removed | TakenUp
         | Held)
StepEntry = Joined | Acted | TimedOut | PauseEnded | Removed | TakenUp | Held  # begin a step


LOG_FORMAT = 2
"""The version of what this module writes, as the nodes of a cluster compare it: a node takes
over no table whose log has entries of a newer format than its own (PostgreSQL refuses it:
``tables.log_format`` against ``nodes.log_format``, server/store/postgres.py; the rolling
upgrade in docs/OPERATING.md, "Upgrades"). **Bump it with every new entry kind and every new
field of an entry**: an older node quarantines a table with a kind it does not know (its
players would be told BAD_TOKEN), and replays a field it does not know as if it were not
there (a join's network dropped: seats of one network rated against each other). On SQLite
(one node, no ``nodes`` to compare) the guard is the schema version: bump
server/store/sqlite.py's SCHEMA_VERSION in the same release (an empty migration will do)
unless the release already moved it, so that an older release refuses the data at start.
1: the releases before formats were counted (up to 1c5f50a); 2: the ``hold`` entry
(``Held``) and a join's ``net`` (``Joined.network``)."""


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)  # made once: ~1 us a row


class ReplayMismatch(ValueError):
    """A log entry does not fit the table it is replayed into."""


def dumps(entry: Entry, action_to_json: Callable[[GameAction], Any]) -> str:
    """One entry as compact JSON (the ``k`` field names its kind); its game's actions as
    ``action_to_json`` (``GameModule.action_to_json``) writes them."""
    data: dict[str, Any]
    match entry:
        case Joined():
            data = {"k": "join", "seq": entry.seq, "seat": entry.seat, "name": entry.name,
                    "token": entry.token_hash}
            if entry.request_key:
                data |= {"rk": entry.request_key, "fp": entry.fingerprint,
                         "sealed": entry.sealed_token}
            if entry.account_id:
                data["acct"] = entry.account_id
            if entry.address:
                data["addr"] = entry.address
            if entry.network:
                data["net"] = entry.network
        case Acted():
            data = {"k": "act", "seq": entry.seq, "a": action_to_json(entry.action),
                    "by": entry.by}
            if entry.request_id:
                data |= {"rid": entry.request_id, "fp": entry.fingerprint}
        case TimedOut():
            data = {"k": "timeout", "seq": entry.seq,
                    "a": [action_to_json(a) for a in entry.actions]}
            if entry.is_away:
                data["away"] = True
        case PauseStarted():
            data = {"k": "pause", "seq": entry.seq, "until": entry.until}
        case PauseEnded():
            data = {"k": "resume", "seq": entry.seq}
        case DeadlineSet():
            data = {"k": "deadline", "seq": entry.seq, "at": entry.at}
        case Removed():
            data = {"k": "remove", "seq": entry.seq, "seat": entry.seat}
        case TakenUp():
            data = {"k": "takeup", "seq": entry.seq, "seat": entry.seat}
        case Held():
            data = {"k": "hold", "seq": entry.seq, "held": entry.is_held}
    if isinstance(entry, StepEntry) and entry.at:
        data["t"] = entry.at
    return _ENCODER.encode(data)


def loads(text: str, action_from_json: Callable[[Any], GameAction] | None = None) -> Entry:
    """Read one entry back (its game's actions with ``action_from_json``, by default the
    default game's); ValueError when it is not one this server writes."""
    if action_from_json is None:
        action_from_json = games.get().action_from_json
    try:
        data = json.loads(text)
        kind, seq, at = data["k"], int(data["seq"]), float(data.get("t", 0.0))
        if kind == "join":
            return Joined(seq, int(data["seat"]), str(data["name"]), str(data["token"]),
                          str(data.get("rk", "")), str(data.get("fp", "")),
                          str(data.get("sealed", "")), at, str(data.get("acct", "")),
                          str(data.get("addr", "")), str(data.get("net", "")))
        if kind == "act":
            return Acted(seq, action_from_json(data["a"]), str(data["by"]),
                         str(data.get("rid", "")), str(data.get("fp", "")), at)
        if kind == "timeout":
            return TimedOut(seq, tuple(action_from_json(a) for a in data["a"]), at,
                            data.get("away") is True)
        if kind == "pause":
            return PauseStarted(seq, float(data["until"]))
        if kind == "resume":
            return PauseEnded(seq, at)
        if kind == "deadline":
            return DeadlineSet(seq, float(data["at"]))
        if kind == "remove":
            return Removed(seq, int(data["seat"]), at)
        if kind == "takeup":
            return TakenUp(seq, int(data["seat"]), at)
        if kind == "hold":
            return Held(seq, data["held"] is True, at)
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"unreadable log entry: {exc!r}") from None
    raise ValueError(f"unknown log entry kind {kind!r}")
