"""Iterators whose items are made on demand: generators, and ``zip``/``enumerate``/``map``/``filter`` over them.

A ``PullIterator`` produces its next item only when a consumer asks
(``next_item(tx)``), so the code that makes an item (a generator's body,
a function given to ``map``) runs interleaved with the consumer's own code,
in program order, exactly as far as eager runs it.  ``GeneratorValue``
holds the suspended ``Tracer`` of an inlined generator function and steps it
to its next ``yield``.

Iterators over items known at capture time stay ``containers.IteratorValue``
(unrolled loops resume over their remaining items).  A pull iterator is never
rebuilt at run time: the generator it stands for never existed there, so a
break that needs one makes the frame run eagerly.  Nothing here adds graph
nodes except through the code it runs.
"""
from __future__ import annotations

import types

from ..errors import GraphBreak
from .base import Value
from .constant import ConstantValue
from .containers import IteratorValue, TupleValue
from .exceptions import PythonError


def iterator_of(tx, value: Value) -> Value:
    """``iter(value)``: an iterator itself, or an ``IteratorValue`` over a known sequence's items."""
    if isinstance(value, (IteratorValue, PullIterator)):
        return value
    from .objects import ObjectValue

    if isinstance(value, ObjectValue):
        made = value.iterator(tx)  # through the class's own __iter__, pulled lazily
        if made is not None:
            return made
    from .live_iterators import live_iterator

    live = live_iterator(tx, value)  # a list, dict or set: read as it is at each next()
    if live is not None:
        return live
    return IteratorValue(value.iterate(tx))


def is_lazy(value: Value) -> bool:
    """Whether asking ``value`` for its items runs code (so consumers must pull them one at a time)."""
    return isinstance(value, PullIterator)


def contains(tx, item: Value, iterator: Value) -> bool:
    """``item in iterator``: pulls until the first item equal to ``item``, as eager does."""
    from .operators import identical

    while True:
        candidate = iterator.next_item(tx)
        if candidate is None:
            return False
        if item.is_constant() and candidate.is_constant():
            same = item.as_constant() == candidate.as_constant()
        else:
            same = identical(item, candidate)
        if same is None:
            raise GraphBreak(f"`in` over {iterator.describe()} compares values not known at capture time")
        if same:
            return True


class PullIterator(Value):
    """An iterator that runs code for each item; subclasses define ``next_item``."""

    def next_item(self, tx) -> Value | None:
        """The next item, or None once exhausted (``StopIteration`` at run time)."""
        raise NotImplementedError

    def iterate(self, tx):
        items = []
        while (item := self.next_item(tx)) is not None:
            items.append(item)
        return items

    def truth(self, tx) -> bool:
        return True

    def reconstruct(self, cg):
        raise GraphBreak(f"{self.describe()} made while capturing cannot be handed to the code that runs "
                         "after the graph (its state exists only in the capture)")


class GeneratorValue(PullIterator):
    """A generator made by calling an inlined generator function (or a generator expression).

    ``tracer`` is the generator frame's child ``Tracer``, suspended after its
    last ``YIELD_VALUE``; each ``next_item`` steps it to the next yield or to
    its return.
    """

    def __init__(self, tracer, fn):
        self.tracer = tracer
        self.fn = fn
        tracer.yielded = []
        self.done = False
        #: Set when a pull broke: the frame's state is then unknown.
        self.broken = False
        self.running = False

    def python_type(self):
        return types.GeneratorType

    def describe(self):
        name = self.fn.__qualname__
        return "a generator expression" if name.endswith("<genexpr>") else f"the generator {name}()"

    @property
    def return_value(self) -> Value:
        """What the generator returned (``StopIteration.value``; the result of ``yield from`` it)."""
        returned = self.tracer.return_value
        return returned if self.done and returned is not None else ConstantValue(None)

    def next_item(self, tx, exact: bool = False):
        """The next item, or None once it returned.

        ``exact``: the consumer is a ``for`` loop, which CPython leaves with what the generator
        raises (the generator is then finished), so that may reach a handler of the consumer's
        frame (``Tracer.step``); any other consumer may hold items where CPython's C code does
        not, so what the generator raises is a break for it.
        """
        if self.done:
            return None
        if self.broken:
            raise GraphBreak(f"{self.describe()} broke the capture earlier")
        if self.running:
            raise GraphBreak(f"{self.describe()} asks itself for its next item (ValueError at run time)")
        frame = self.tracer
        # The consumer is the generator's caller now: user stacks and inlining depth follow it.
        frame.parent = tx
        pulled = len(frame.yielded)
        self.running = True
        handled = tx.ctx.exc_info
        frame.pulled_by_loop = exact
        try:
            while len(frame.yielded) == pulled:
                frame.step()
                if frame.return_value is not None:
                    self.done = True
                    return None
        except GraphBreak as e:
            if exact and isinstance(e, PythonError):
                self.done = True  # it raised to its loop: finished, as eager's
            else:
                self.broken = True
            tx.ctx.exc_info = handled  # a break inside one of its handlers leaves it there
            if not e.user_stack:
                e.user_stack = frame.user_stack()
            raise
        finally:
            self.running = False
            frame.pulled_by_loop = False
        return frame.yielded[-1]

    def throw(self, tx, exception) -> Value | None:
        """``gen.throw(e)`` at the ``yield`` it is suspended at: its handler runs to the next item or its end.

        The next item, or None once it returned; what leaves its frame is raised (a ``PythonError``).
        """
        from .exceptions import PythonError

        frame = self.tracer
        if self.broken or self.running or not frame.managed:
            raise GraphBreak(f"throwing an exception into {self.describe()} is not captured")
        if self.done or not frame.catch(PythonError(exception, reraise=True), frame.checkpoint()):
            self.done = True
            raise PythonError(exception, reraise=True)
        return self.next_item(tx)


class ZipValue(PullIterator):
    """``zip(...)`` over iterators of which at least one is a pull iterator."""

    def __init__(self, iterators: list[Value]):
        self.iterators = iterators
        self.done = not iterators

    def python_type(self):
        return zip

    def describe(self):
        return "a zip over a generator"

    def next_item(self, tx):
        if self.done:
            return None
        row = []
        for it in self.iterators:
            item = it.next_item(tx)
            if item is None:
                # Eager stops at the first exhausted iterator: the later ones are not asked.
                self.done = True
                return None
            row.append(item)
        return TupleValue(row)


class EnumerateValue(PullIterator):
    def __init__(self, iterator: Value, start: int):
        self.iterator = iterator
        self.count = start

    def python_type(self):
        return enumerate

    def describe(self):
        return "an enumerate over a generator"

    def next_item(self, tx):
        item = self.iterator.next_item(tx)
        if item is None:
            return None
        index, self.count = self.count, self.count + 1
        return TupleValue([ConstantValue(index), item])


def call_back(tx, fn: Value, args: list[Value]) -> Value:
    """``fn(*args)`` called back by a builtin's model (a ``map`` function, a sort key): its result is not
    the result of the CALL being traced, so a break inside it is never resumed as if it were
    (``Tracer.direct_call``)."""
    calling, tx.calling = tx.calling, False
    try:
        return fn.call(tx, args, {})
    finally:
        tx.calling = calling


def _not_catchable(next_item):
    """What a ``map``/``filter`` function raises while pulling is a break, never a handler's.

    Its consumer may have pulled items ahead or collected them where CPython's C code
    holds them (``lst.extend(map(f, xs))`` keeps the items before the failure), and a
    ``StopIteration`` ends the consumer's loop instead of propagating: not modelled.
    """
    def pull(self, tx):
        from .exceptions import PythonError

        try:
            return next_item(self, tx)
        except PythonError as e:
            plain = GraphBreak(e.reason)
            plain.frames, plain.user_stack = e.frames, e.user_stack
            raise plain from None

    return pull


class MapValue(PullIterator):
    def __init__(self, fn: Value, iterators: list[Value]):
        self.fn = fn
        self.zipped = ZipValue(iterators)

    def python_type(self):
        return map

    def describe(self):
        return "a map object"

    @_not_catchable
    def next_item(self, tx):
        row = self.zipped.next_item(tx)
        return None if row is None else call_back(tx, self.fn, row.items)


class FilterValue(PullIterator):
    def __init__(self, fn: Value | None, iterator: Value):
        self.fn = fn
        self.iterator = iterator

    def python_type(self):
        return filter

    def describe(self):
        return "a filter object"

    @_not_catchable
    def next_item(self, tx):
        while True:
            item = self.iterator.next_item(tx)
            if item is None:
                return None
            keep = item if self.fn is None else call_back(tx, self.fn, [item])
            if keep.truth(tx):
                return item
