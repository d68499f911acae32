"""What the store keeps and how the rest of the server talks to it.

- ``Storage``: the protocol every store implements (the in-memory one, SQLite, PostgreSQL):
  writes queued in order by the synchronous table code, ``sync`` once they are durable,
  the tables to rebuild at start, and the records of finished games.
- ``Write``: the typed operations a batch holds (one frozen dataclass per kind).
- ``TableMeta``, ``GameRecord``, ``RecordSummary``: the typed values stored beside a table's
  log (its JSON forms are the on-disk format, read back by ``from_json``).

Fail-stop: once a commit fails, ``failure`` is set, every later write raises
``StorageFailed`` (nothing is queued after a failure, so memory never runs ahead of what the
server will ever claim), ``sync`` raises it, and ``failed()`` resolves for the server to stop.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import import_module
from typing import Any, Generic, Protocol, TypeVar

from server.games.names import DEFAULT_GAME, GAMES

APPLICATION = "copas"  # what a Copas database says it is


# ---------------------------------------------------------------- errors


class StorageError(Exception):
    """The store cannot be used (at start) or failed (a commit)."""


class StoreUnusable(StorageError):
    """The data directory or database cannot be used; the message is one line saying why."""


class StorageFailed(StorageError):
    """A commit failed: nothing in it (or after it) is durable; the server must stop."""


class StoreUnreachable(StorageError):
    """A read found the database away (restarting, say): the call that needed it is refused
    (retry shortly); nothing was written, so the server goes on."""


# ---------------------------------------------------------------- typed values


class GameResult(Protocol):
    """How a finished game went, as its record keeps it (each game's own value: its module's
    ``result_from_dict`` reads it back)."""

    @property
    def is_over(self) -> bool: ...
    @property
    def end_reason(self) -> Any:
        """``engine.GameEndReason`` (None while the game runs)."""
    @property
    def totals(self) -> Sequence[int]: ...
    @property
    def leavers(self) -> Sequence[Any]:
        """Who left (``seat``, ``hand_number``, ``trick_number``), in the order they left."""
    def to_dict(self) -> dict[str, Any]: ...


class RecordFormat(Protocol):
    """What the store reads of a game's module (``server.games.GameModule``) to write and
    read back its tables' meta and its records."""

    @property
    def record_format(self) -> int:
        """The ``format`` its engine's records carry."""
    def rules_from_dict(self, data: dict[str, Any]) -> Any:
        """:raises ValueError: not rules of this game."""
    def result_from_dict(self, data: dict[str, Any]) -> GameResult:
        """:raises ValueError, KeyError, TypeError: not a result of this game."""
    def action_to_json(self, action: Any) -> Any: ...
    def action_from_json(self, data: Any) -> Any: ...
    def deals(self, rules: Any, seed: int | str, actions: Sequence[Any]
              ) -> list[list[list[str]]]:
        """Each hand's cards as dealt, seat by seat, in the cards' text form, replayed from
        the seed (empty: the game shows none, or the actions do not replay)."""


def game_format(game: str) -> RecordFormat:
    """The module of ``game`` as the store reads it (imported by name: the games' modules
    import the store, never the other way).

    :raises ValueError: this server plays no game of that name."""
    if game not in GAMES:
        raise ValueError(f"unknown game {game!r}: this server plays {', '.join(GAMES)}")
    module: RecordFormat = import_module(f"server.games.{game}").MODULE
    return module


def _object(data: Any, what: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ValueError(f"{what} is not a JSON object")
    return data


@dataclass(frozen=True, slots=True)
class TableMeta:
    """What a restarted server needs to rebuild a table from its log."""

    name: str
    """The table's display name (its id when it was given none)."""
    preset: str
    """The preset its rules started from."""
    rules: Any
    """The rules it plays by (its game's frozen rules value)."""
    seed: int | str
    """The seed of its deals (never shown to a client)."""
    bot_seats: int
    """How many of the highest-numbered seats bots hold."""
    order: int
    """Its place in the server's creation order (the lobby lists newest first)."""
    request_key: str = ""
    """The digest of the CreateTable request_id that made it, if any."""
    fingerprint: str = ""
    """The digest of that request's content (AIP-155)."""
    bot_policy: str = "auto"
    """How its bot seats play."""
    rating: str = "people"
    """Which of its finished games move ratings ("people", "with_bots", "off")."""
    is_quick: bool = False
    """A quick match could have opened it (the preset's rules and the server's defaults, no
    bots): its seats are reservations, and one client holds one of them."""
    bot_pace: float = 0.0
    """Seconds its bots wait before they act (the server's, never in its log)."""
    rematch_of: str = ""
    """The finished table whose rematch it is ("" for none): the old table's pointer to it
    comes back with it after a restart."""
    championship: str = ""
    """The championship whose round it is a table of ("" for none): its record is withheld
    until the round ends."""
    is_spectating_closed: bool = False
    """Nobody watches it but its players (a championship's table with duplicate deals: its
    cards would tell another table's)."""
    game: str = DEFAULT_GAME
    """The game it plays (``server.games``; written only when not the default one, so the
    meta of a table of the default game reads as it always did)."""

    def to_json(self) -> str:
        return json.dumps({
            "name": self.name, "preset": self.preset, "rules": self.rules.to_dict(),
            "seed": self.seed, "bots": self.bot_seats, "order": self.order,
            "rk": self.request_key, "fp": self.fingerprint, "bot_policy": self.bot_policy,
            **({"rating": self.rating} if self.rating != "people" else {}),
            **({"quick": True} if self.is_quick else {}),
            **({"bot_pace": self.bot_pace} if self.bot_pace else {}),
            **({"rematch_of": self.rematch_of} if self.rematch_of else {}),
            **({"championship": self.championship} if self.championship else {}),
            **({"closed_to_spectators": True} if self.is_spectating_closed else {}),
            **({"game": self.game} if self.game != DEFAULT_GAME else {})})

    @classmethod
    def from_json(cls, text: str) -> TableMeta:
        """:raises ValueError: the text is not a table's meta this server writes."""
        try:
            data = _object(json.loads(text), "table meta")
            seed = data["seed"]
            if not isinstance(seed, (int, str)):
                raise ValueError("seed is neither a number nor a string")
            game = str(data.get("game", DEFAULT_GAME))
            return cls(str(data["name"]), str(data["preset"]),
                       game_format(game).rules_from_dict(_object(data["rules"], "rules")), seed,
                       int(data["bots"]), int(data.get("order", 0) or 0),
                       str(data.get("rk", "")), str(data.get("fp", "")),
                       str(data.get("bot_policy", "auto")), str(data.get("rating", "people")),
                       data.get("quick") is True, float(data.get("bot_pace", 0.0) or 0.0),
                       str(data.get("rematch_of", "")), str(data.get("championship", "")),
                       data.get("closed_to_spectators") is True, game)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"unreadable table meta: {exc!r}") from None


@dataclass(frozen=True, slots=True)
class SeatRecord:
    """Who held a seat of a finished game."""

    seat: int
    name: str
    is_bot: bool
    account_id: str = ""
    """The account that held the seat ("" for an anonymous seat or a bot)."""
    has_acted: bool = True
    """Its person made a move of their own in the game (False: a no-show, whose every move
    the server made; a championship ranks them with the leavers)."""
    own_cards: int = 0
    """Cards its person played themselves (not on a timeout, while away or after leaving)."""
    cards: int = 0
    """Cards the seat played in all (its person's, and those played for it)."""
    network: str = ""
    """Its signed-in person's network tag (``server.tokens.network_tag``; "" unknown). Kept,
    never shown: a public record says only whom each rated seat was rated against."""
    player: str = ""
    """The per-game pseudonym of its account (``server.tokens.pseudonym``; "" for an
    anonymous seat or a bot): what a public record calls it, kept when the account is
    deleted."""


@dataclass(frozen=True, slots=True)
class RecordSummary:
    """A finished game as ListGameRecords shows it."""

    record_id: str
    table_id: str
    display_name: str
    preset: str
    created: float
    """When the table was made (seconds since the epoch)."""
    finished: float
    """When its game ended."""
    seed: int | str
    rules: Any
    """Its game's rules value."""
    seats: tuple[SeatRecord, ...]
    result: GameResult
    rating: str = "people"
    """Its table's rating rule."""
    championship: str = ""
    """The championship it was a game of ("" for none)."""
    game: str = DEFAULT_GAME
    """The game it holds (a record without the field holds the default game's)."""

    def to_dict(self, *, is_public: bool = False) -> dict[str, Any]:
        """The JSON form this server keeps; ``is_public``: the form everyone may read, whose
        seats name no account and no network (a pseudonym per game instead)."""
        return {"record_id": self.record_id, "table_id": self.table_id,
                "display_name": self.display_name, "preset": self.preset,
                "created": self.created, "finished": self.finished, "seed": self.seed,
                "rules": self.rules.to_dict(),
                "seats": [_seat_dict(s, is_public) for s in self.seats],
                "result": self.result.to_dict(),
                **({"rating": self.rating} if self.rating != "people" else {}),
                **({"championship": self.championship} if self.championship else {}),
                **({"game": self.game} if self.game != DEFAULT_GAME else {})}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RecordSummary:
        """:raises ValueError: not a record this server writes."""
        try:
            game = str(data.get("game", DEFAULT_GAME))
            module = game_format(game)
            return cls(str(data["record_id"]), str(data["table_id"]),
                       str(data["display_name"]), str(data["preset"]),
                       float(data["created"]), float(data["finished"]), data["seed"],
                       module.rules_from_dict(_object(data["rules"], "rules")),
                       tuple(SeatRecord(int(s["seat"]), str(s["name"]), bool(s["is_bot"]),
                                        str(s.get("account", "")), s.get("acted") is not False,
                                        int(s.get("own", 0)), int(s.get("cards", 0)),
                                        str(s.get("net", "")),
                                        str(s.get("player", "")))
                             for s in data["seats"]),
                       module.result_from_dict(_object(data["result"], "result")),
                       str(data.get("rating", "people")), str(data.get("championship", "")),
                       game)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"unreadable game record: {exc!r}") from None

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_json(cls, text: str) -> RecordSummary:
        return cls.from_dict(_object(json.loads(text), "record summary"))


def _seat_dict(seat: SeatRecord, is_public: bool) -> dict[str, Any]:
    return {"seat": seat.seat, "name": seat.name, "is_bot": seat.is_bot,
            **({"account": seat.account_id} if seat.account_id and not is_public else {}),
            **({"player": seat.player} if seat.player else {}),
            **({} if seat.has_acted else {"acted": False}),
            **({"own": seat.own_cards, "cards": seat.cards} if not seat.is_bot else {}),
            **({"net": seat.network} if seat.network and not is_public else {})}


@dataclass(frozen=True, slots=True)
class GameRecord:
    """A finished game: replayable by the engine (rules, seed, actions) and carrying its
    result, seats and times."""

    summary: RecordSummary
    actions: tuple[Any, ...]
    """Its game's actions, in order."""

    def to_dict(self, *, is_public: bool = False) -> dict[str, Any]:
        """The record's JSON form: ``engine.record.to_record``'s (what ``copas replay``
        reads) with the summary's fields beside it (``is_public``: as everyone may read it,
        see ``RecordSummary.to_dict``, with each hand's deal, ``deals``, for a replay's
        starting hands: the seed replayed, which anyone given the record could do)."""
        module = game_format(self.summary.game)
        data = {"format": module.record_format,
                "actions": [module.action_to_json(a) for a in self.actions],
                **self.summary.to_dict(is_public=is_public)}
        if is_public and (deals := self.deals()):
            data["deals"] = deals
        return data

    def deals(self) -> list[list[list[str]]]:
        """Each hand's cards as dealt, seat by seat (empty when the game's module gives none,
        or for a record whose actions do not replay from its seed)."""
        return game_format(self.summary.game).deals(self.summary.rules, self.summary.seed,
                                                     self.actions)

    def to_json(self, *, is_public: bool = False) -> str:
        return json.dumps(self.to_dict(is_public=is_public), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> GameRecord:
        """:raises ValueError: not a record this server writes."""
        data = _object(json.loads(text), "game record")
        try:
            module = game_format(str(data.get("game", DEFAULT_GAME)))
            actions = tuple(module.action_from_json(a) for a in data["actions"])
        except (KeyError, TypeError) as exc:
            raise ValueError(f"unreadable game record: {exc!r}") from None
        return cls(RecordSummary.from_dict(data), actions)


@dataclass(frozen=True, slots=True)
class StoredTable:
    """A table as the store holds it, to rebuild from its log."""

    table_id: str
    created: float
    meta: TableMeta | None
    """None when it could not be read (``error`` says why): the table is quarantined."""
    entries: tuple[tuple[int, str], ...]
    """Its log: (position, entry JSON), in order."""
    is_finished: bool
    sequence: int
    """The highest event sequence ever shown for it."""
    finished: float | None = None
    error: str | None = None


def stored_table(table_id: str, created: float, meta: str, entries: Sequence[tuple[int, str]],
                 status: str, sequence: int, finished: float | None) -> StoredTable:
    """A table row as either database returns it."""
    try:
        return StoredTable(table_id, created, TableMeta.from_json(meta), tuple(entries),
                           status == "finished", sequence, finished)
    except ValueError as exc:
        return StoredTable(table_id, created, None, tuple(entries), status == "finished",
                           sequence, finished, str(exc))


# ---------------------------------------------------------------- what is written


@dataclass(frozen=True, slots=True)
class CreateTable:
    table_id: str
    created: float
    meta: TableMeta


@dataclass(frozen=True, slots=True)
class Append:
    table_id: str
    n: int
    entry: str  # JSON, see server.tables.log_entries


@dataclass(frozen=True, slots=True)
class DeleteEntry:
    table_id: str
    n: int


@dataclass(frozen=True, slots=True)
class FinishTable:
    """A game's record, written in the same transaction as its last action."""

    table_id: str
    record: GameRecord


@dataclass(frozen=True, slots=True)
class RewriteRecord:
    """A kept record written again (a deleted account's name taken out of it)."""

    record: GameRecord


@dataclass(frozen=True, slots=True)
class ReleaseTable:
    """The table goes: its log and its row (a finished game's record stays)."""

    table_id: str


Write = CreateTable | Append | DeleteEntry | FinishTable | RewriteRecord | ReleaseTable
W = TypeVar("W")


@dataclass
class Batch(Generic[W]):
    """What one commit writes: the writes in order, and each table's highest shown sequence."""

    writes: list[W] = field(default_factory=list)
    sequences: dict[str, int] = field(default_factory=dict)


# ---------------------------------------------------------------- the protocol


class Storage(Protocol):
    """What the tables, the registry and recovery need of a store."""

    @property
    def failure(self) -> StorageFailed | None:
        """Set once a commit failed (fail-stop)."""

    def check_writable(self) -> None:
        """:raises StorageFailed: the store failed; nothing more may change."""

    def create_table(self, table_id: str, created: float, meta: TableMeta) -> None: ...

    def append(self, table_id: str, entry: str) -> int:
        """Queue one log entry; returns its position in the table's log."""

    def delete_entry(self, table_id: str, n: int) -> None: ...

    def note_sequence(self, table_id: str, sequence: int) -> None:
        """The table has shown events up to ``sequence`` (kept with the next commit)."""

    def finish_table(self, table_id: str, record: GameRecord) -> None: ...

    def release_table(self, table_id: str) -> None: ...

    def rewrite_record(self, record: GameRecord) -> None:
        """Write a kept record again, as it is now (its row only; ``sync`` commits it)."""

    @property
    def has_pending(self) -> bool:
        """Writes are queued that no commit has taken yet."""

    async def sync(self) -> None:
        """Return once everything queued so far is durable.

        :raises StorageFailed: it never will be.
        """

    async def failed(self) -> StorageFailed:
        """Resolve when a commit fails."""

    def load_tables(self) -> list[StoredTable]:
        """The tables to rebuild at start."""

    def get_record(self, record_id: str) -> bytes | None:
        """A finished game as a serialized copas.v1.GameRecord (with its JSON), as everyone
        may read it (no account, no network: ``RecordSummary.to_dict(is_public=True)``)."""

    def get_kept_record(self, record_id: str) -> GameRecord | None:
        """A finished game as this server keeps it (its seats' accounts and networks too),
        for the server's own use only."""

    def list_records(self, limit: int, before: tuple[float, str] | None
                     ) -> list[RecordSummary]:
        """Records newest first (by finish time, then id), after the page position
        ``before`` (finished, record_id)."""

    def prune_records(self, keep: int, max_age: float, now: float) -> int:
        """Keep the ``keep`` newest and those younger than ``max_age`` seconds (0: no
        limit); returns how many went."""

    async def close(self) -> None: ...
