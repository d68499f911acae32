"""Where a call is served, as a router decides it: here, or relayed to the node owning its
table; and the owner's public address to tell the client (``x-copas-owner``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Destination:
    """Where a call is served, as its router decided."""

    relay_to: str | None = None
    """The address of the node to relay the call to (its table's owner); None: here."""
    owner: str = ""
    """The public address of the node owning the call's table, told to the client in the
    answer's initial metadata (``x-copas-owner``); '' tells nothing."""


HERE = Destination()
"""Served here, nothing to tell."""
