"""``collections.deque``: a sequence of values with a ``maxlen``, its methods run as the real deque's.

A deque made in the trace is rebuilt once (``collections.deque(items, maxlen)``) where it escapes or
lives across a break; one read from the frame is guarded by its type, its ``maxlen`` and what is read
of its items, and a change to it is written back in place after the graph (``clear`` then
``extend``: the object keeps its identity).  Its methods run on a real ``collections.deque`` of the
item values (``container_methods``), so order, the items ``maxlen`` drops and the errors are
CPython's.  It must not be concatenated as a tuple or list is (``deque + deque`` is a deque).
"""
from __future__ import annotations

import collections

from ..errors import GraphBreak
from .base import Value
from .constant import ConstantValue
from .containers import FrameItems, SequenceValue
from .live_iterators import LiveIteratorValue

#: deque methods (``container_methods`` runs them on a real deque of the values).
_METHODS = frozenset({"append", "appendleft", "extend", "extendleft", "pop", "popleft", "rotate", "reverse",
                      "clear", "copy", "remove", "index", "count", "insert"})


class DequeValue(SequenceValue):
    container_type = collections.deque

    def __init__(self, items, source=None, maxlen: int | None = None):
        super().__init__(items, source)
        self.maxlen = maxlen
        self.mutated = False
        #: CPython's ``deque->state``: bumped by each change of the items' places (not by ``reverse`` nor an
        #: item assignment), which an iterator made before then sees (``DequeIteratorValue``).
        self.state = 0

    @classmethod
    def from_frame(cls, frame_items: FrameItems, maxlen: int | None = None):
        value = super().from_frame(frame_items)
        value.maxlen, value.mutated, value.state = maxlen, False, 0
        return value

    def describe(self):
        where = f" {self.source.expr()}" if self.source is not None else ""
        return f"deque{where} of {self.length(guard=False)}"

    def as_constant(self):
        return collections.deque((i.as_constant() for i in self.items), self.maxlen)

    def mutate(self, tx, what: str = "") -> None:
        if self.source is not None and not self.mutated:
            tx.record_container_mutation(self)
        self.mutated = True
        tx.ctx.mutations += 1

    def getattr(self, tx, name):
        if name == "maxlen":
            return ConstantValue(self.maxlen)
        if name in _METHODS:
            from .container_methods import ItemsMethodValue

            return ItemsMethodValue(self, name)
        return super().getattr(tx, name)

    def real_items(self) -> collections.deque:
        return collections.deque(self.items, self.maxlen)

    def mutate_items(self, tx, real: collections.deque, method: str = "", args=()) -> None:
        self.mutate(tx)
        self.items = list(real)
        if method != "reverse" and not (method in ("extend", "extendleft") and not args[0]):
            self.state += 1

    def live_iterator(self, tx) -> "DequeIteratorValue":
        return DequeIteratorValue(self)

    def like_items(self, real) -> "DequeValue":
        return DequeValue(list(real), maxlen=real.maxlen)

    def getitem(self, tx, index):
        key = index.as_constant()
        if not isinstance(key, int):
            from .exceptions import python_error

            raise python_error(TypeError, f"sequence index must be integer, not '{type(key).__name__}'")
        try:
            return self.item(key)
        except IndexError:
            from .exceptions import python_error

            raise python_error(IndexError, "deque index out of range",
                               reason=f"index {key} out of range for {self.describe()}") from None

    def setitem(self, tx, index, value):
        real = self.real_items()
        try:
            real[index.as_constant()] = value
        except (IndexError, TypeError) as e:
            from .exceptions import from_real

            raise from_real(e) from None
        self.mutate_items(tx, real, "reverse")  # an item replaced in place: no iterator notices

    def delitem(self, tx, index):
        real = self.real_items()
        try:
            del real[index.as_constant()]
        except (IndexError, TypeError) as e:
            from .exceptions import from_real

            raise from_real(e) from None
        self.mutate_items(tx, real)

    def reconstruct(self, cg):
        if self.source is not None:
            cg.extend(self.source.emit())
            return
        # One deque per run however many places hold it (``return q, [q]``).
        cg.build_once(self, self._build)

    def _build(self, cg) -> None:
        cg.append("PUSH_NULL")
        cg.load_const(collections.deque)
        for item in self.items:
            item.reconstruct(cg)
        cg.append("BUILD_LIST", len(self.items))
        cg.load_const(self.maxlen)
        cg.append("PRECALL", 2)
        cg.append("CALL", 2)

    def emit_update(self, cg) -> None:
        """Write the final items into the frame's deque, keeping its identity: ``clear()``, ``extend(...)``."""
        for item in self.items:
            item.reconstruct(cg)
        cg.append("BUILD_LIST", len(self.items))
        cg.append("STORE_FAST", "___new_contents")
        for method, args in ((collections.deque.clear, ()), (collections.deque.extend, ("___new_contents",))):
            cg.append("PUSH_NULL")
            cg.load_const(method)
            cg.extend(self.source.emit())
            for name in args:
                cg.append("LOAD_FAST", name)
            cg.append("PRECALL", 1 + len(args))
            cg.append("CALL", 1 + len(args))
            cg.append("POP_TOP")


class DequeIteratorValue(LiveIteratorValue):
    """``iter(q)``: the items by position, while the deque's ``state`` is the one it was made with; after a
    change every ``next()`` raises ``RuntimeError: deque mutated during iteration`` (even once exhausted)."""

    def __init__(self, deque: DequeValue):
        super().__init__(deque)
        self.state = deque.state

    @property
    def items(self) -> list[Value]:
        return self.container.items

    @items.setter
    def items(self, items) -> None:
        raise GraphBreak("an iterator over a deque cannot be given other items")

    def check_unchanged(self) -> None:
        if self.container.state != self.state:
            raise GraphBreak("an iterator over a deque changed since it was made is used after the graph")

    def next_item(self, tx) -> Value | None:
        if self.container.state != self.state:
            from .exceptions import python_error

            raise python_error(RuntimeError, "deque mutated during iteration",
                               reason="deque mutated during iteration (RuntimeError at run time)")
        return super().next_item(tx)


class DequeClassValue(Value):
    """The class ``collections.deque``: calling it makes a ``DequeValue`` (as the real one, on the values)."""

    def __init__(self, source=None):
        self.source = source

    def describe(self):
        return "`collections.deque`"

    def python_type(self):
        return type

    def is_constant(self):
        return True  # ``isinstance(q, collections.deque)``

    def as_constant(self):
        return collections.deque

    def real_object(self):
        return collections.deque

    def getattr(self, tx, name):
        if name in ("__name__", "__qualname__", "__module__", "__doc__", "__mro__", "__bases__"):
            return ConstantValue(getattr(collections.deque, name))
        return super().getattr(tx, name)

    def call(self, tx, args, kwargs):
        from .objects import all_items

        if len(args) > 2 or set(kwargs) - {"iterable", "maxlen"}:
            raise GraphBreak("deque() takes at most 2 arguments (TypeError at run time)")
        iterable = args[0] if args else kwargs.get("iterable")
        maxlen = args[1] if len(args) > 1 else kwargs.get("maxlen", ConstantValue(None))
        if not maxlen.is_constant():
            raise GraphBreak("deque() with a maxlen known only at run time")
        items = all_items(tx, iterable) if iterable is not None else []
        try:
            real = collections.deque(items, maxlen.as_constant())
        except (TypeError, ValueError) as e:
            from .exceptions import from_real

            raise from_real(e) from None
        return DequeValue(list(real), maxlen=real.maxlen)


def frame_deque(tx, obj: collections.deque, source) -> Value:
    """A deque read from the frame: its type and ``maxlen`` guarded here, its items as they are read."""
    known = tx.ctx.containers.get(id(obj))
    if known is not None:
        return known
    from ..source import AttrSource

    tx.guards.type_match(source, obj)
    tx.guards.equals_match(AttrSource(source, "maxlen"), obj.maxlen)
    value = DequeValue.from_frame(FrameItems(tx, obj, source), obj.maxlen)
    tx.ctx.containers[id(obj)] = value
    return value


def is_deque(value: Value) -> bool:
    return isinstance(value, DequeValue)
