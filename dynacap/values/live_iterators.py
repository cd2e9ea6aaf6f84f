"""Iterators over mutable containers of the trace: a list, a dict (or one of its views), a set.

CPython's iterators of these read the container as it is *now* at each
``next()``: a list iterator is an index into the live list (items appended
inside the loop are reached; once exhausted it stays so), a dict or set
iterator raises ``RuntimeError`` when the container's size changed since it
was made.  A snapshot of the items would give another answer as soon as the
loop body changes the container, so these iterators keep the container and
answer as CPython's do.  A dict whose keys changed without changing its size
is a graph break (CPython's answer depends on its hash table).

A loop over one of these is never resumed inside after a graph break (the
resumed loop would iterate a copy): ``codegen.breaks`` refuses, and the
iterator is rebuilt as ``islice(container, position, None)`` over the live
container for the eager rest of the frame.  Nothing here adds graph nodes.
"""
from __future__ import annotations

import itertools

from ..errors import GraphBreak
from .base import Value
from .containers import DictValue, DictViewValue, IteratorValue, ListValue


class LiveIteratorValue(IteratorValue):
    """Base of the iterators that read their container at each ``next()``."""

    def __init__(self, container: Value):
        self.container = container
        self.position = 0
        self.exhausted = False

    @property
    def items(self) -> list[Value]:
        """The items as the container holds them now (what ``next()`` would read from)."""
        raise NotImplementedError

    @items.setter
    def items(self, items) -> None:
        raise GraphBreak("an iterator over a list, dict or set cannot be given other items")

    def describe(self):
        return f"iterator over {self.container.describe()}"

    def next_item(self, tx) -> Value | None:
        if self.exhausted:
            return None
        items = self.items
        if self.position >= len(items):
            self.exhausted = True  # CPython drops the container: later additions are not seen
            return None
        item = items[self.position]
        self.position += 1
        return item

    def iterate(self, tx):
        rest = []
        while (item := self.next_item(tx)) is not None:
            rest.append(item)
        return rest

    def reconstruct(self, cg):
        if self.exhausted:
            cg.load_const(())
            cg.append("GET_ITER")
            return
        self.check_unchanged()
        if self.position == 0:
            self.container.reconstruct(cg)
            cg.append("GET_ITER")
            return
        # islice skips the items already read at its first next(), then reads the live container.
        cg.call(itertools.islice, self.container, self.position, None)

    def check_unchanged(self) -> None:
        """Raise where the iterator's next answer depends on a change only CPython's table knows."""


class ListIteratorValue(LiveIteratorValue):
    """``iter(l)`` of a list: an index into the live list."""

    @property
    def items(self) -> list[Value]:
        return self.container.items

    @items.setter
    def items(self, items) -> None:
        raise GraphBreak("an iterator over a list cannot be given other items")


class SizedIteratorValue(LiveIteratorValue):
    """``iter()`` of a dict, a dict view or a set: the keys it had when made, read while its size holds."""

    def __init__(self, container: Value, keys: list, message: str):
        super().__init__(container)
        self.keys = list(keys)
        self.message = message
        self.failed = False  # CPython's error is sticky: every later next() raises it again

    @property
    def items(self) -> list[Value]:
        return self.container_items()

    @items.setter
    def items(self, items) -> None:
        raise GraphBreak("an iterator over a dict or set cannot be given other items")

    def container_items(self) -> list[Value]:
        raise NotImplementedError

    def current_keys(self) -> list:
        raise NotImplementedError

    def check_unchanged(self) -> None:
        keys = self.current_keys()
        if self.failed or len(keys) != len(self.keys):
            from .exceptions import python_error

            self.failed = True
            raise python_error(RuntimeError, self.message, reason=f"{self.message} (RuntimeError at run time)")
        if keys != self.keys:
            raise GraphBreak(f"the keys of {self.container.describe()} changed while a loop iterates over it "
                             "(CPython's answer depends on its hash table)")

    def next_item(self, tx) -> Value | None:
        if self.exhausted:
            return None
        self.check_unchanged()
        return super().next_item(tx)


class DictIteratorValue(SizedIteratorValue):
    """``iter(d)``, ``iter(d.keys())``, ``iter(d.values())``, ``iter(d.items())``."""

    def __init__(self, container: DictValue | DictViewValue):
        d = container.dict_value if isinstance(container, DictViewValue) else container
        super().__init__(container, list(d.items), "dictionary changed size during iteration")
        self.dict_value = d
        self.kind = container.kind if isinstance(container, DictViewValue) else "keys"

    def current_keys(self) -> list:
        return list(self.dict_value.items)

    def container_items(self) -> list[Value]:
        return DictViewValue(self.dict_value, self.kind).items  # the view's items, as they are now


class SetIteratorValue(SizedIteratorValue):
    """``iter(s)`` of a set made in or read by the trace (CPython's order, ``values.sets``)."""

    def __init__(self, container: Value, tx):
        self.members = container.iterate(tx)
        super().__init__(container, list(container.keys), "Set changed size during iteration")

    def current_keys(self) -> list:
        return list(self.container.keys)

    def container_items(self) -> list[Value]:
        return self.members


class ReversedListIteratorValue(LiveIteratorValue):
    """``reversed(l)`` of a list: an index from the end of the live list (CPython's ``listreviterator``).

    The index starts at the list's last item when made and goes down; an index past the list's end
    (it shrank) or below zero exhausts it.
    """

    def __init__(self, container: ListValue):
        super().__init__(container)
        self.index = len(container.items) - 1

    @property
    def items(self) -> list[Value]:
        return list(reversed(self.container.items[: self.index + 1]))

    @items.setter
    def items(self, items) -> None:
        raise GraphBreak("a reversed iterator over a list cannot be given other items")

    def python_type(self):
        return type(reversed([]))

    def describe(self):
        return f"reversed iterator over {self.container.describe()}"

    def next_item(self, tx) -> Value | None:
        items = self.container.items
        if 0 <= self.index < len(items):
            item = items[self.index]
            self.index -= 1
            return item
        self.index = -1
        return None

    def reconstruct(self, cg):
        if self.index != len(self.container.items) - 1:
            # Its index is not where a new reversed() of the list would start.
            raise GraphBreak(f"{self.describe()}, partly read or over a list that changed length, is used after "
                             "the graph (the function runs eagerly)")
        cg.call(reversed, self.container)


def live_reversed(container: ListValue) -> ReversedListIteratorValue:
    """``reversed(l)`` of a list value."""
    return ReversedListIteratorValue(container)


def live_iterator(tx, value: Value) -> IteratorValue | None:
    """The live iterator of a list, dict, dict view or set value; None for any other value."""
    from .sets import SetValue

    if type(value) is ListValue:
        return ListIteratorValue(value)
    if type(value) is DictValue or type(value) is DictViewValue:
        return DictIteratorValue(value)
    if type(value) is SetValue and not value.frozen:
        return SetIteratorValue(value, tx)
    own = getattr(value, "live_iterator", None)  # a deque (values.deques): its own, with CPython's state check
    return own(tx) if own is not None else None
