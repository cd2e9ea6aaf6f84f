"""Containers built of values: tuples, lists, dicts, and iterators over known items.

Items are ``Value``s, so a tuple may hold tensors and constants together.
Containers read from the frame keep their ``source``; lists and dicts
created while tracing are tracked for mutation so that the code generator
can rebuild them.  Mutating a container that came from outside the frame is
a side effect the foundation does not replay, so it is a graph break.
"""
from __future__ import annotations

from ..errors import GraphBreak
from .base import Value
from .constant import ConstantValue


def load_existing(container: Value, cg) -> bool:
    """Push the runtime object a container already is, if it is one; False if it must be built.

    A container from the frame is reloaded from its source (a mutated one was
    updated in place by the side-effect replay); one made while tracing and
    shared across a break is reloaded from its local (``Emitter.share``).
    """
    if container.source is not None:
        cg.extend(container.source.emit())
        return True
    return cg.load_shared(container)


class SequenceValue(Value):
    container_type: type = tuple

    def __init__(self, items: list[Value], source=None):
        self.items = list(items)
        self.source = source

    def python_type(self) -> type:
        return self.container_type

    def is_constant(self) -> bool:
        return all(i.is_constant() for i in self.items)

    def as_constant(self):
        return self.container_type(i.as_constant() for i in self.items)

    def describe(self) -> str:
        where = f" {self.source.expr()}" if self.source is not None else ""
        return f"{self.container_type.__name__}{where} of {len(self.items)}"

    def truth(self, tx) -> bool:
        return bool(self.items)

    def iterate(self, tx):
        return list(self.items)

    def getitem(self, tx, index):
        key = index.as_constant()
        if isinstance(key, slice):
            return type(self)(self.items[key])
        if not isinstance(key, int):
            raise GraphBreak(f"indexing {self.describe()} with {type(key).__name__}")
        try:
            return self.items[key]
        except IndexError:
            raise GraphBreak(f"index {key} out of range for {self.describe()}") from None

    def reconstruct(self, cg):
        if load_existing(self, cg):
            return
        for item in self.items:
            item.reconstruct(cg)
        cg.append("BUILD_TUPLE" if self.container_type is tuple else "BUILD_LIST", len(self.items))


class TupleValue(SequenceValue):
    container_type = tuple

    def getattr(self, tx, name):
        if name in ("count", "index"):
            from .functions import ContainerMethodValue

            return ContainerMethodValue(self, name)
        return super().getattr(tx, name)


class StructSeqValue(TupleValue):
    """A named result tuple of a torch operation (``torch.return_types.max``: ``.values``, ``.indices``)."""

    def __init__(self, items, tuple_class: type, source=None):
        super().__init__(items, source)
        self.tuple_class = tuple_class

    def python_type(self):
        return self.tuple_class

    def as_constant(self):
        return self.tuple_class(tuple(i.as_constant() for i in self.items))

    def getattr(self, tx, name):
        fields = self.tuple_class.__match_args__
        if name in fields:
            return self.items[fields.index(name)]
        return super().getattr(tx, name)

    def reconstruct(self, cg):
        if load_existing(self, cg):
            return
        cg.append("PUSH_NULL")
        cg.load_const(self.tuple_class)
        for item in self.items:
            item.reconstruct(cg)
        cg.append("BUILD_TUPLE", len(self.items))
        cg.append("PRECALL", 1)
        cg.append("CALL", 1)


class SizeValue(TupleValue):
    """``torch.Size``: its dims are constants, or symbolic numbers for symbolic sizes (dynamic shapes)."""

    def python_type(self):
        import torch

        return torch.Size

    def as_constant(self):
        import torch

        return torch.Size(i.as_constant() for i in self.items)

    def getattr(self, tx, name):
        if name == "numel":
            from .functions import ConstantMethodValue

            return ConstantMethodValue(ConstantValue(self.as_constant()), name)
        return super().getattr(tx, name)

    def reconstruct(self, cg):
        if all(isinstance(i, ConstantValue) for i in self.items):
            cg.load_const(self.as_constant())
            return
        import torch

        cg.append("PUSH_NULL")
        cg.load_const(torch.Size)
        for item in self.items:
            item.reconstruct(cg)
        cg.append("BUILD_TUPLE", len(self.items))
        cg.append("PRECALL", 1)
        cg.append("CALL", 1)


class ListValue(SequenceValue):
    container_type = list

    def __init__(self, items, source=None):
        super().__init__(items, source)
        self.mutated = False

    def mutate(self, tx, what: str) -> None:
        if self.source is not None and not self.mutated:
            tx.record_container_mutation(self)
        self.mutated = True
        tx.ctx.mutations += 1

    def getattr(self, tx, name):
        from .functions import ContainerMethodValue

        if name in ("append", "extend", "insert", "pop", "reverse", "clear", "index", "count", "copy"):
            return ContainerMethodValue(self, name)
        return super().getattr(tx, name)

    def setitem(self, tx, index: Value, value: Value) -> None:
        self.mutate(tx, "item assignment")
        key = index.as_constant()
        if isinstance(key, slice):
            self.items[key] = value.iterate(tx)
        else:
            self.items[key] = value


class DictValue(Value):
    """A dict with constant keys."""

    def __init__(self, items: dict, source=None):
        self.items = dict(items)
        self.source = source
        self.mutated = False

    def python_type(self):
        return dict

    def describe(self):
        where = f" {self.source.expr()}" if self.source is not None else ""
        return f"dict{where} of {len(self.items)}"

    def is_constant(self):
        return all(v.is_constant() for v in self.items.values())

    def as_constant(self):
        return {k: v.as_constant() for k, v in self.items.items()}

    def truth(self, tx):
        return bool(self.items)

    def iterate(self, tx):
        return [ConstantValue(k) for k in self.items]

    def getitem(self, tx, index):
        key = index.as_constant()
        if key not in self.items:
            raise GraphBreak(f"key {key!r} is not in {self.describe()} (KeyError at run time)")
        return self.items[key]

    def mutate(self, tx) -> None:
        if self.source is not None and not self.mutated:
            tx.record_container_mutation(self)
        self.mutated = True
        tx.ctx.mutations += 1

    def setitem(self, tx, index, value):
        self.mutate(tx)
        self.items[index.as_constant()] = value

    def getattr(self, tx, name):
        from .functions import ContainerMethodValue

        if name in ("keys", "values", "items", "get", "update", "pop", "setdefault", "copy"):
            return ContainerMethodValue(self, name)
        return super().getattr(tx, name)

    def reconstruct(self, cg):
        if not load_existing(self, cg):
            self.build(cg)

    def build(self, cg) -> None:
        """Emit a new dict with the current items."""
        for k, v in self.items.items():
            cg.load_const(k)
            v.reconstruct(cg)
        cg.append("BUILD_MAP", len(self.items))


class IteratorValue(Value):
    """The iterator of an unrolled ``for`` loop: its items are known at capture time.

    Iterators that run code to make each item (generators) are ``iterators.PullIterator``;
    both answer ``next_item(tx)``.
    """

    def __init__(self, items: list[Value]):
        self.items = list(items)
        self.position = 0

    def describe(self):
        return f"iterator over {len(self.items)} items"

    def next_item(self, tx) -> Value | None:
        """The next item, or None once exhausted."""
        if self.position >= len(self.items):
            return None
        item = self.items[self.position]
        self.position += 1
        return item

    def iterate(self, tx):
        rest = self.items[self.position:]
        self.position = len(self.items)
        return rest

    def reconstruct(self, cg):
        for item in self.items[self.position:]:
            item.reconstruct(cg)
        cg.append("BUILD_LIST", len(self.items) - self.position)
        cg.append("GET_ITER")
