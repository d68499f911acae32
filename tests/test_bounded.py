"""The one bounded mapping behind the server's caches: at most ``limit`` keys, the oldest
forgotten first; an LRU one counts a read as a use."""

from __future__ import annotations

import pytest

from server.bounded import Bounded


def test_it_holds_at_most_its_limit_forgetting_the_oldest_write_first() -> None:
    memory: Bounded[str, int] = Bounded(3)
    for n, key in enumerate("abcd"):
        memory[key] = n
    assert list(memory) == ["b", "c", "d"] and len(memory) == 3
    memory["b"] = 10  # written again: the newest now
    memory["e"] = 4
    assert list(memory.items()) == [("d", 3), ("b", 10), ("e", 4)]


def test_reads_move_nothing_unless_it_is_lru() -> None:
    plain: Bounded[str, int] = Bounded(2)
    lru: Bounded[str, int] = Bounded(2, is_lru=True)
    for memory in (plain, lru):
        memory["a"], memory["b"] = 1, 2
        assert memory.get("a") == 1 and "b" in memory and memory.get("x") is None
        memory["c"] = 3
    assert list(plain) == ["b", "c"]  # "a" was the oldest write
    assert list(lru) == ["a", "c"]  # "b" was the least recently used ("in" is no use)


def test_iterating_an_lru_ones_values_or_items_moves_nothing() -> None:
    lru: Bounded[str, int] = Bounded(3, is_lru=True)  # its values() once raised "OrderedDict
    lru["a"], lru["b"], lru["c"] = 1, 2, 3  # mutated during iteration" (each read moved a key)
    assert list(lru.values()) == [1, 2, 3] and list(lru.items()) == [("a", 1), ("b", 2), ("c", 3)]
    lru["d"] = 4
    assert list(lru) == ["b", "c", "d"]


def test_keys_can_go_before_their_time() -> None:
    memory: Bounded[str, int] = Bounded(2)
    memory["a"] = 1
    assert memory.pop("a") == 1 and memory.pop("a", None) is None
    memory["b"] = 2
    del memory["b"]
    assert len(memory) == 0


def test_a_bound_holds_at_least_one_key() -> None:
    with pytest.raises(ValueError):
        Bounded(0)

