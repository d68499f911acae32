"""One bounded memory for the server's caches: a mapping that holds at most ``limit`` keys
and forgets the oldest first when a new key would pass it."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import ItemsView, Iterator, MutableMapping, ValuesView
from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Bounded(MutableMapping[K, V]):
    """At most ``limit`` keys, oldest first. Writing a key makes it the newest; so does
    reading one when ``is_lru`` (a least-recently-used cache). When a write would hold more
    than ``limit`` keys, the oldest go (``in``, iteration, ``values()`` and ``items()`` move
    nothing: a reader that walks the mapping never reorders it under itself)."""

    __slots__ = ("_items", "is_lru", "limit")

    def __init__(self, limit: int, *, is_lru: bool = False) -> None:
        if limit < 1:
            raise ValueError("a bounded mapping holds at least one key")
        self.limit = limit
        self.is_lru = is_lru
        self._items: OrderedDict[K, V] = OrderedDict()

    def __getitem__(self, key: K) -> V:
        value = self._items[key]
        if self.is_lru:
            self._items.move_to_end(key)
        return value

    def __setitem__(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.limit:
            self._items.popitem(last=False)

    def __delitem__(self, key: K) -> None:
        del self._items[key]

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __iter__(self) -> Iterator[K]:
        return iter(self._items)

    def values(self) -> ValuesView[V]:
        return self._items.values()  # (Mapping's would read each key: an LRU one moves it)

    def items(self) -> ItemsView[K, V]:
        return self._items.items()

    def __len__(self) -> int:
        return len(self._items)
