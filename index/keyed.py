"""Items reached by an event's value of one attribute: how many holders each item has per value.

Section 4.3's AN index finds the nodes whose static atoms an event satisfies.
A node whose filter has no static atom — only ``$1.Name = Name`` comparing an
instance's bound value with the event — is satisfied statically by every
event, so the AN index would return it for all of them, and the AI index would
then find nothing in it for most.  With thousands of such nodes (patterns of
distinct shapes, each waiting on its own partition) every event would visit
every node.  :class:`KeyedItems` keeps such items by the values their holders
(the node's live instances) have bound instead: per ``(stream, attribute)``, a
value → item → count map, so an event reaches only the items holding its value.

>>> nodes = KeyedItems()
>>> nodes.add("Stock", "Name", "IBM", 7)
>>> nodes.add("Stock", "Name", "IBM", 7)
>>> nodes.add("Stock", "Name", "SAP", 9)
>>> sorted(nodes.probe("Stock", {"Name": "IBM", "Price": 1.0}))
[7]
>>> nodes.remove("Stock", "Name", "IBM", 7)
>>> sorted(nodes.probe("Stock", {"Name": "IBM", "Price": 1.0}))
[7]
>>> nodes.remove("Stock", "Name", "IBM", 7)
>>> sorted(nodes.probe("Stock", {"Name": "IBM", "Price": 1.0}))
[]
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping
from typing import Generic, TypeVar

from cesar.index.ranges import Value

T = TypeVar("T", bound=Hashable)


class KeyedItems(Generic[T]):
    """Items counted under ``(stream, attribute, value)``; add / remove / probe.

    Cost: add and remove O(1); :meth:`probe` O(attributes of the stream + items found).
    """

    def __init__(self) -> None:
        self._streams: dict[str, dict[str, dict[Value | None, dict[T, int]]]] = {}

    def add(self, stream: str, attr: str, value: Value | None, item: T) -> None:
        """One more holder of ``value`` for ``item``.  O(1)."""
        values = self._streams.setdefault(stream, {}).setdefault(attr, {})
        items = values.setdefault(value, {})
        items[item] = items.get(item, 0) + 1

    def remove(self, stream: str, attr: str, value: Value | None, item: T) -> None:
        """One holder fewer; KeyError if ``item`` has none of ``value``.  O(1)."""
        attrs = self._streams[stream]
        values = attrs[attr]
        items = values[value]
        left = items[item] - 1
        if left:
            items[item] = left
            return
        del items[item]
        if not items:
            del values[value]
            if not values:
                del attrs[attr]
                if not attrs:
                    del self._streams[stream]

    def probe(self, stream: str, attrs: Mapping[str, Value | None]) -> Iterator[T]:
        """The items holding the event's value of one of their attributes (an item keyed on
        several attributes may come once per attribute)."""
        for attr, values in self._streams.get(stream, {}).items():
            items = values.get(attrs[attr])
            if items:
                yield from items

    def counts(self) -> dict[tuple[str, str, Value | None, T], int]:
        """Every count, by (stream, attribute, value, item)."""
        return {
            (stream, attr, value, item): count
            for stream, by_attr in self._streams.items()
            for attr, values in by_attr.items()
            for value, items in values.items()
            for item, count in items.items()
        }

    def check_valid(self) -> None:
        """Assert that every count is positive and no map is empty."""
        for by_attr in self._streams.values():
            assert by_attr, "an empty stream map"
            for values in by_attr.values():
                assert values, "an empty attribute map"
                for items in values.values():
                    assert items, "an empty value map"
                    assert all(count > 0 for count in items.values())
