"""Iterators handed in by the frame: a ``range`` iterator (the iterable of a comprehension resumed after a
graph break, an ``iter(range(n))`` argument).

Its items left are known from its state (``__reduce__``: the range and an index), guarded when the frame
starts; the trace unrolls them.  The real iterator is advanced as eager advances it: its new index is
written back after the graph (``__setstate__``), before the frame's eager rest runs, and a resume or
the eager rest gets the real iterator again, never a copy.  Nothing here adds graph nodes.
"""
from __future__ import annotations

from .base import Value
from .constant import ConstantValue
from .containers import IteratorValue

RANGE_ITERATOR = type(iter(range(0)))


class FrameRangeIterator(IteratorValue):
    """A ``range_iterator`` from the frame, at ``source``: its remaining items, and its real index."""

    def __init__(self, tx, iterator, source):
        _, (span,), index = iterator.__reduce__()
        tx.guards.add("EQUALS_MATCH", source, "type({s}) is {t} and {s}.__reduce__()[1:] == {state}",
                      f"{source.expr()} is an iterator of {span!r} at index {index}", t=RANGE_ITERATOR,
                      state=((span,), index))
        super().__init__([ConstantValue(v) for v in span[index:]])
        self.source = source
        self.start = index
        self.recorded = False

    def describe(self):
        return f"range iterator {self.source.expr()}"

    def next_item(self, tx) -> Value | None:
        self._record_advance(tx)
        return super().next_item(tx)

    def iterate(self, tx):
        self._record_advance(tx)
        return super().iterate(tx)

    def _record_advance(self, tx) -> None:
        """Once, where the trace first advances it: the real iterator's new index is written after the graph."""
        if not self.recorded:
            self.recorded = True
            tx.record_iterator_advance(self)

    def written_state(self) -> int:
        """The index the real iterator has where eager would be now."""
        return self.start + self.position

    def reconstruct(self, cg):
        cg.load_source(self.source)
