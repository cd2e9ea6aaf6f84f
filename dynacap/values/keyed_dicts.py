"""``KeyedDictValue``: a dict from the frame read by key only, its keys tensors (``Optimizer.state``).

Tensors hash by identity, so a tensor key is the tensor its source leads
to.  Each key read is guarded by its membership (``(p in d) is True``) and
the entry wrapped through ``d[p]`` (``KeyedItemSource``); a ``defaultdict``
missing the key makes the default its factory makes (``dict``, ``list``) as
eager does.  Writes (``d[p] = v``, those defaults) are replayed after the
graph, one store per key.  What needs every key (``len``, iteration, views)
breaks: the keys are not known.

A frame dict first seen with constant keys only (an empty ``defaultdict``)
becomes this kind when a tensor key reaches it: ``NeedsKeyedDict`` makes the
capture start again with that dict's source read by key.
"""
from __future__ import annotations

import collections

from ..errors import GraphBreak
from ..source import AttrSource, ItemSource, KeyedItemSource
from .base import Value
from .constant import ConstantValue, is_literal

#: Factories of defaultdicts whose default is made in the trace (an empty container).
_FACTORIES = (dict, list)


class NeedsKeyedDict(Exception):
    """A dict from the frame wrapped with constant keys met a tensor key: trace again, reading it by key."""

    def __init__(self, source_expr: str):
        super().__init__(source_expr)
        self.source_expr = source_expr


def reads_by_key(obj, source, keyed: set) -> bool:
    """Whether the frame dict ``obj`` at ``source`` is a ``KeyedDictValue``: its keys are tensors (or asked)."""
    if type(obj) not in (dict, collections.defaultdict, collections.OrderedDict):
        return False
    if source.expr() in keyed:
        return True
    return bool(obj) and all(_is_tensor(k) for k in obj)


def _is_tensor(obj) -> bool:
    import torch

    return issubclass(type(obj), torch.Tensor)


class KeyedDictValue(Value):
    def __init__(self, tx, obj, source):
        self.obj = obj
        self.source = source
        #: id(real key) -> (key value, entry value): what the trace read or wrote.
        self.entries: dict[int, tuple[Value, Value]] = {}
        #: The writes to replay, in the order the keys were first written.
        self.written: dict[int, tuple[Value, Value]] = {}
        tx.guards.type_match(source, obj)
        if type(obj) is collections.defaultdict:
            factory = AttrSource(source, "default_factory")
            if obj.default_factory is None:
                tx.guards.equals_match(factory, None)
            else:
                tx.guards.id_match(factory, obj.default_factory)

    def python_type(self):
        return type(self.obj)

    def describe(self):
        return f"{type(self.obj).__name__} {self.source.expr()} (read by key)"

    def _key(self, tx, index: Value):
        """(the real key, the source of its entry) for a constant or a tensor reached from the frame."""
        from .grads import real_tensor
        from .tensor import TensorValue

        if isinstance(index, TensorValue) and index.source is not None:
            real = real_tensor(tx, index)
            if real is not None:
                return real, KeyedItemSource(self.source, index.source)
        if index.is_constant() and is_literal(index.as_constant()):
            key = index.as_constant()
            return key, ItemSource(self.source, key)
        raise GraphBreak(f"{self.describe()} indexed by {index.describe()}: only tensors from the frame and "
                         "constants are keys the capture can follow")

    def _present(self, tx, real, entry_source) -> bool:
        present = real in self.obj
        key_expr = entry_source.key.expr() if isinstance(entry_source, KeyedItemSource) else repr(real)
        tx.guards.relation(f"({key_expr} in {self.source.expr()}) is {present}",
                           [self.source] + ([entry_source.key] if isinstance(entry_source, KeyedItemSource) else []))
        return present

    def getitem(self, tx, index):
        from .containers import DictValue, ListValue
        from .wrap import wrap

        real, entry_source = self._key(tx, index)
        known = self.entries.get(id(real))
        if known is not None:
            return known[1]
        if self._present(tx, real, entry_source):
            entry = wrap(tx, self.obj[real], entry_source)
            self.entries[id(real)] = (index, entry)
            return entry
        factory = getattr(self.obj, "default_factory", None)
        if factory not in _FACTORIES:
            raise GraphBreak(f"key {index.describe()} is not in {self.describe()} (KeyError at run time, or a "
                             "default made by a factory the capture does not model)")
        entry = DictValue({}) if factory is dict else ListValue([])
        self._write(tx, index, real, entry)
        return entry

    def setitem(self, tx, index, value):
        real, _ = self._key(tx, index)
        self._write(tx, index, real, value)

    def contains(self, tx, item) -> Value:
        real, entry_source = self._key(tx, item)
        if id(real) in self.entries:
            return ConstantValue(True)
        return ConstantValue(self._present(tx, real, entry_source))

    def _write(self, tx, key: Value, real, value: Value) -> None:
        if not self.written:
            tx.record_container_mutation(self)
        tx.ctx.mutations += 1
        self.entries[id(real)] = (key, value)
        self.written[id(real)] = (key, value)

    def emit_update(self, cg) -> None:
        """After the graph: ``d[key] = value`` for each key written."""
        for key, value in self.written.values():
            value.reconstruct(cg)
            cg.extend(self.source.emit())
            key.reconstruct(cg)
            cg.append("STORE_SUBSCR")

    def iterate(self, tx):
        raise GraphBreak(f"iterating over {self.describe()}: its keys are not known at capture time")

    def truth(self, tx):
        raise GraphBreak(f"the truth value of {self.describe()}: its keys are not known at capture time")

    def getattr(self, tx, name):
        if name in ("get", "setdefault"):
            return _KeyedMethod(self, name)
        raise GraphBreak(f"`{name}` of {self.describe()}: its keys are not known at capture time")


class _KeyedMethod(Value):
    def __init__(self, owner: KeyedDictValue, name: str):
        self.owner = owner
        self.name = name

    def describe(self):
        return f"{self.owner.describe()}.{self.name}"

    def call(self, tx, args, kwargs):
        if kwargs or not 1 <= len(args) <= 2:
            raise GraphBreak(f"{self.describe()} with these arguments")
        owner, key = self.owner, args[0]
        default = args[1] if len(args) > 1 else ConstantValue(None)
        if owner.contains(tx, key).as_constant():
            return owner.getitem(tx, key)
        if self.name == "setdefault":
            owner.setitem(tx, key, default)
        return default
