"""``obj.__dict__`` as a value: of an object from the frame (``InstanceDictValue``: entries read one by one,
each guarded) or of one made in the trace (``NewInstanceDictValue``: its attributes, ``NewObjectValue.attrs``).

Only reads are modelled (``get``, ``[]``, ``in``; for objects made in the trace also ``len``, iteration and
the ``keys``/``values``/``items`` views, and the writes ``d[k] = v`` and ``update``); other writes
through ``__dict__`` are breaks.  Nothing here
runs user code: the frame object's dict is read with ``object.__getattribute__``.
"""
from __future__ import annotations

from ..errors import GraphBreak
from ..source import GenericAttrSource
from .base import DELETED, Value
from .constant import ConstantValue
from .objects import _MISSING, ObjectValue, _dict_expr, _is_data_descriptor, class_lookup, instance_dict


class InstanceDictValue(Value):
    """``obj.__dict__`` of a sourced object: ``get``/``[]`` read one entry, guarded one by one."""

    def __init__(self, owner: ObjectValue):
        self.owner = owner
        self.source = GenericAttrSource(owner.source, "__dict__")

    def describe(self):
        return f"{self.owner.describe()}.__dict__"

    def python_type(self):
        return dict

    def getattr(self, tx, name):
        if name == "get":
            return _DictGet(self)
        if name in ("keys", "values", "items"):
            return _ViewMethod(self.snapshot(tx), name)
        raise GraphBreak(f"`.{name}` of {self.describe()} is not supported")

    def names(self, tx) -> list[str]:
        """The object's attribute names in order, guarded as a frame dict's keys are (``keys_match``)."""
        obj = self.owner.obj
        d = instance_dict(obj)
        if d is None or any(key == id(obj) for key, _ in tx.ctx.attribute_overrides):
            raise GraphBreak(f"iterating {self.describe()} (written in the trace, or not a plain dict)")
        tx.guards.keys_match(self.source, list(d))
        return list(d)

    def snapshot(self, tx):
        """The entries as a dict value of this same dict (its source): what its views read."""
        from .containers import DictValue

        return DictValue({k: self.entry(tx, k, None) for k in self.names(tx)}, self.source)

    def iterate(self, tx):
        return [ConstantValue(k) for k in self.names(tx)]

    def truth(self, tx):
        return bool(self.names(tx))

    def entry(self, tx, key, default: Value | None) -> Value:
        from ..source import ItemSource
        from .wrap import wrap

        obj = self.owner.obj
        override = tx.attribute_override(obj, key)
        if override is DELETED:
            raise GraphBreak(f"{self.describe()}[{key!r}] was deleted while capturing")
        if override is not None:
            return override
        d = instance_dict(obj)
        if key in d:
            return wrap(tx, d[key], ItemSource(self.source, key))
        if default is None:
            raise GraphBreak(f"{self.describe()}[{key!r}] is missing (KeyError at run time)")
        tx.guards.add("NOT_PRESENT", self.owner.source, f"{key!r} not in {_dict_expr(obj)}",
                      f"{key!r} not in {self.describe()}")
        return default

    def getitem(self, tx, index):
        key = index.as_constant()
        if type(key) is not str:
            raise GraphBreak(f"{self.describe()}[{key!r}]: attribute names are strings")
        return self.entry(tx, key, None)


class NewInstanceDictValue(Value):
    """``obj.__dict__`` of an object made in the trace: its attributes (``attrs``), read by key."""

    def __init__(self, owner: ObjectValue):
        self.owner = owner

    def describe(self):
        return f"the __dict__ of {self.owner.describe()}"

    def python_type(self):
        return dict

    @property
    def items(self) -> dict:
        """The entries by name (what a ``DictViewValue`` of this dict reads at each use)."""
        return self.owner.attrs

    def getattr(self, tx, name):
        if name == "get":
            return _DictGet(self)
        if name in ("keys", "values", "items"):
            return _ViewMethod(self, name)
        if name == "update":
            return _Update(self)
        raise GraphBreak(f"`.{name}` of {self.describe()} is not supported")

    def iterate(self, tx):
        return [ConstantValue(k) for k in self.owner.attrs]

    def length(self) -> int:
        return len(self.owner.attrs)

    def entry(self, tx, key, default: Value | None) -> Value:
        found = self.owner.attrs.get(key)
        if found is not None:
            return found
        if default is None:
            raise GraphBreak(f"{self.describe()}[{key!r}] is missing (KeyError at run time)")
        return default

    def getitem(self, tx, index):
        return self.entry(tx, index.as_constant(), None)

    def setitem(self, tx, index, value):
        """``obj.__dict__[k] = v``: the entry itself, past ``__setattr__`` and the class's descriptors."""
        if not index.is_constant() or type(index.as_constant()) is not str:
            raise GraphBreak(f"a key that is not a string into {self.describe()}")
        self.owner._changed(tx)
        self.owner.attrs[index.as_constant()] = value

    def contains(self, tx, item) -> Value:
        if not item.is_constant():
            raise GraphBreak(f"`in` over {self.describe()} with {item.describe()}")
        return ConstantValue(item.as_constant() in self.owner.attrs)

    def truth(self, tx):
        return bool(self.owner.attrs)

    def reconstruct(self, cg) -> None:
        # Past a class's own ``__getattribute__`` (objects made in the trace may have one).
        cg.call(object.__getattribute__, self.owner, "__dict__")


class _ViewMethod(Value):
    """``obj.__dict__.keys``/``.values``/``.items`` of an object made in the trace: live views of its attributes."""

    def __init__(self, owner: NewInstanceDictValue, kind: str):
        self.owner = owner
        self.kind = kind

    def describe(self):
        return f"{self.owner.describe()}.{self.kind}"

    def call(self, tx, args, kwargs):
        from .containers import DictViewValue

        if args or kwargs:
            raise GraphBreak(f"{self.describe()}() takes no arguments (TypeError at run time)")
        return DictViewValue(self.owner, self.kind)


class _Update(Value):
    """``obj.__dict__.update(mapping)`` of an object made in the trace: one store per entry, past ``__setattr__``
    (a data descriptor of the class for a name breaks: ``__dict__.update`` would bypass it)."""

    def __init__(self, owner: NewInstanceDictValue):
        self.owner = owner

    def describe(self):
        return f"{self.owner.describe()}.update"

    def call(self, tx, args, kwargs):
        from .containers import DictValue

        source = args[0].snapshot(tx) if len(args) == 1 and isinstance(args[0], InstanceDictValue) else \
            args[0] if len(args) == 1 else None
        if kwargs or not isinstance(source, (DictValue, NewInstanceDictValue)):
            raise GraphBreak(f"{self.describe()} with these arguments")
        cls = type(self.owner.owner.obj)
        for name, value in dict(source.items).items():
            if type(name) is not str:
                raise GraphBreak(f"{self.describe()} with a key that is not a string")
            attr = class_lookup(cls, name)
            if attr is not _MISSING and _is_data_descriptor(attr):
                raise GraphBreak(f"{self.describe()}: {name!r} is a {type(attr).__name__} of the class, which "
                                 "the update bypasses")
            self.owner.owner.store(tx, name, value)
        return ConstantValue(None)


class _DictGet(Value):
    def __init__(self, owner: InstanceDictValue):
        self.owner = owner

    def describe(self):
        return f"{self.owner.describe()}.get"

    def call(self, tx, args, kwargs):
        if kwargs or not 1 <= len(args) <= 2 or not args[0].is_constant() or type(args[0].as_constant()) is not str:
            raise GraphBreak(f"{self.describe()} with these arguments")
        return self.owner.entry(tx, args[0].as_constant(), args[1] if len(args) > 1 else ConstantValue(None))
