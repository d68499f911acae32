"""A table's seats on their own: which seat a join takes and why one is refused, the
--max-players slots taken and given back exactly once, the tokens and join keys the seats
hold, and the request ids a seat remembers for its retries."""

from __future__ import annotations

import pytest

from server.errors import ServiceError
from server.tables.seats import REQUEST_MEMORY, Seats


class SlotCount:
    """A host that counts the slots its tables' people hold."""

    def __init__(self) -> None:
        self.held = 0
        self.taken = 0

    def slot_taken(self) -> None:
        self.held += 1
        self.taken += 1

    def slot_freed(self) -> None:
        self.held -= 1


def reason(error: pytest.ExceptionInfo[ServiceError]) -> str:
    return error.value.reason


def test_the_last_seats_are_the_bots_and_the_rest_are_free() -> None:
    seats = Seats(4, 2, SlotCount())
    assert len(seats) == 4 and [s.number for s in seats] == [0, 1, 2, 3]
    assert [(s.is_taken, s.is_bot, s.name) for s in seats] == [
        (False, False, ""), (False, False, ""), (True, True, "Cleo"), (True, True, "Dario")]
    assert seats.has_free_seat() and not seats.is_full()
    assert seats.any_bot([0, 3]) and not seats.any_bot([0, 1])
    assert seats.people_among([3, 1, 2, 0]) == [1, 0]


def test_a_join_takes_the_seat_asked_or_the_first_free_one() -> None:
    seats = Seats(4, 0, SlotCount())
    assert seats.choose(None).number == 0
    assert seats.choose(2).number == 2
    seats.seat_person(0, "Ana", "h0", log_n=1)
    assert seats.choose(None).number == 1


def test_a_join_is_refused_a_seat_out_of_range_taken_or_when_the_table_is_full() -> None:
    seats = Seats(4, 3, SlotCount())
    for number in (-1, 4):
        with pytest.raises(ServiceError) as bad:
            seats.choose(number)
        assert reason(bad) == "INVALID_SEAT"
    with pytest.raises(ServiceError) as taken:
        seats.choose(3)  # a bot's
    assert reason(taken) == "SEAT_TAKEN"
    seats.seat_person(0, "Ana", "h0", log_n=1)
    assert seats.is_full() and not seats.has_free_seat()
    with pytest.raises(ServiceError) as full:
        seats.choose(None)
    assert reason(full) == "TABLE_FULL"


def test_a_person_takes_a_slot_and_gives_it_back_once() -> None:
    slots = SlotCount()
    seats = Seats(4, 0, slots)
    seats.seat_person(0, "Ana", "h0", log_n=1)
    seats.seat_person(1, "Bea", "h1", log_n=2)
    assert slots.held == 2
    seats.free_slot(0)  # Ana leaves the running game
    seats.free_slot(0)  # and again: nothing more to give back
    assert slots.held == 1
    seats.free_all_slots()  # the table leaves this node
    seats.free_all_slots()
    assert slots.held == 0 and slots.taken == 2


def test_a_seat_given_up_is_free_again_with_nothing_of_its_person() -> None:
    slots = SlotCount()
    seats = Seats(4, 0, slots)
    seats.seat_person(1, "Ana", "h1", log_n=7, join_key="k1", fingerprint="f",
                      sealed_token="sealed")
    seats.remember(1, "r1", "fp", 5)
    was = seats.vacate(1)
    assert (was.name, was.token_hash, was.join_key, was.log_n) == ("Ana", "h1", "k1", 7)
    assert not seats[1].is_taken and seats[1].name == "" and slots.held == 0
    assert seats.token_hashes() == [] and seats.join_keys() == []
    assert seats.recall_join("k1", "f") is None  # a retried join no longer finds it
    assert seats.recall(1, "r1", "fp") is None  # nor a retried action its answer
    assert seats.choose(None).number == 0 and seats.choose(1).number == 1


def test_the_seats_hold_their_peoples_tokens_and_join_keys() -> None:
    seats = Seats(4, 1, SlotCount())
    seats.seat_person(0, "Ana", "h0", log_n=1, join_key="k0")
    seats.seat_person(2, "Cris", "h2", log_n=2)
    assert seats.token_hashes() == ["h0", "h2"]
    assert seats.join_keys() == ["k0"]


def test_a_retried_join_finds_its_seat_and_sealed_token_unless_its_content_changed() -> None:
    seats = Seats(4, 0, SlotCount())
    seats.seat_person(2, "Ana", "h2", log_n=1, join_key="k", fingerprint="f",
                      sealed_token="sealed")
    assert seats.recall_join("k", "f") == (2, "sealed")
    assert seats.recall_join("other", "f") is None
    with pytest.raises(ServiceError) as reused:
        seats.recall_join("k", "another request")
    assert reused.value.reason == "REQUEST_ID_REUSED"


def test_an_operator_revokes_a_person_who_keeps_the_seat_but_no_token() -> None:
    seats = Seats(4, 0, SlotCount())
    seats.seat_person(0, "Ana", "h0", log_n=1, join_key="k0", fingerprint="f")
    assert seats.person_at(0).name == "Ana"
    assert seats.revoke(0) == ("h0", "k0")
    assert seats[0].is_taken and seats[0].name == "Ana"
    assert seats.token_hashes() == [] and seats.recall_join("k0", "f") is None
    with pytest.raises(ServiceError) as removed:
        seats.person_at(0)
    assert reason(removed) == "NOT_A_PERSON"


@pytest.mark.parametrize(("number", "expected"), [(1, "NOT_A_PERSON"), (3, "NOT_A_PERSON"),
                                                  (4, "INVALID_SEAT")])
def test_only_a_seated_person_can_be_removed(number: int, expected: str) -> None:
    seats = Seats(4, 1, SlotCount())  # seat 1 is free, seat 3 a bot's
    with pytest.raises(ServiceError) as refused:
        seats.person_at(number)
    assert reason(refused) == expected


def test_a_seat_remembers_its_latest_request_ids_and_their_first_answers() -> None:
    seats = Seats(4, 0, SlotCount())
    seats.seat_person(0, "Ana", "h0", log_n=1)
    for n in range(REQUEST_MEMORY + 1):
        seats.remember(0, f"r{n}", f"fp{n}", n)
    assert seats.recall(0, "r0", "fp0") is None  # the oldest went
    assert seats.recall(0, "r1", "fp1") == 1
    assert seats.recall(0, f"r{REQUEST_MEMORY}", f"fp{REQUEST_MEMORY}") == REQUEST_MEMORY
    with pytest.raises(ServiceError) as reused:
        seats.recall(0, "r1", "another request")
    assert reused.value.reason == "REQUEST_ID_REUSED"
    assert seats.recall(1, "r1", "fp1") is None  # each seat its own


def test_a_free_seat_remembers_nothing() -> None:
    seats = Seats(4, 0, SlotCount())
    seats.remember(0, "r", "fp", 3)
    assert seats.recall(0, "r", "fp") is None
