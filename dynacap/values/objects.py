"""``ObjectValue``: any other Python object reached from the frame (configs, user classes).

Plain attributes (instance ``__dict__`` or class constants) are read at
capture time and guarded through their source; methods written in Python
are inlined with the object bound.  Properties are inlined; other
descriptors and effects are graph breaks.
"""
from __future__ import annotations

import inspect

from ..errors import GraphBreak
from ..source import AttrSource
from .base import Value


class ObjectValue(Value):
    def __init__(self, obj, source=None):
        self.obj = obj
        self.source = source
        #: False when only the type is guarded (the runtime object may be another instance).
        self.identity_known = True

    def describe(self):
        where = f" {self.source.expr()}" if self.source is not None else ""
        return f"{type(self.obj).__name__} object{where}"

    def python_type(self):
        return type(self.obj)

    def real_object(self):
        if not self.identity_known:
            raise GraphBreak(f"{self.describe()} is a different object on each call (only its type is guarded)")
        return self.obj

    def getattr(self, tx, name):
        from .functions import BoundMethodValue, UserFunctionValue
        from .wrap import wrap

        override = tx.attribute_override(self.obj, name)
        if override is not None:
            return override
        d = getattr(self.obj, "__dict__", None)
        static = inspect.getattr_static(self.obj, name, _MISSING)
        cls_attr = inspect.getattr_static(type(self.obj), name, _MISSING)
        is_data_descriptor = cls_attr is not _MISSING and hasattr(type(cls_attr), "__set__")
        if d is not None and name in d and not is_data_descriptor:
            return wrap(tx, d[name], AttrSource(self.source, name) if self.source is not None else None)
        if isinstance(static, property) and static.fget is not None:
            guard_class_attribute(tx, self, self.obj, name, static)
            return UserFunctionValue(static.fget).call(tx, [self], {})
        if inspect.isfunction(static):
            guard_class_attribute(tx, self, self.obj, name, static)
            return BoundMethodValue(UserFunctionValue(static), self)
        if static is _MISSING:
            if type(self.obj).__getattr__ if hasattr(type(self.obj), "__getattr__") else None:
                raise GraphBreak(f"attribute `{name}` of {self.describe()} comes from a custom __getattr__")
            raise GraphBreak(f"{self.describe()} has no attribute {name!r} (AttributeError at run time)")
        if hasattr(type(static), "__get__") and not isinstance(static, (staticmethod, classmethod)):
            raise GraphBreak(f"attribute `{name}` of {self.describe()} is a {type(static).__name__} descriptor")
        return wrap(tx, getattr(self.obj, name), AttrSource(self.source, name) if self.source is not None else None)

    def setattr(self, tx, name, value):
        tx.record_setattr(self, name, value)

    def truth(self, tx):
        cls = type(self.obj)
        if not hasattr(cls, "__bool__") and not hasattr(cls, "__len__"):
            return True
        raise GraphBreak(f"truth value of {self.describe()} (custom __bool__/__len__)")


_MISSING = object()


def guard_class_attribute(tx, value: Value, obj, name: str, attr) -> None:
    """``obj.<name>`` resolved to the class attribute ``attr`` (a method or property).

    Guard that the class still holds ``attr`` and that the instance does not
    shadow it, so that patching either (``obj.run = ...``, ``Cls.run = ...``)
    recompiles instead of inlining the old code.
    """
    source = value.source
    if source is None:
        return
    if not name.isidentifier():
        raise GraphBreak(f"attribute {name!r} of {value.describe()} is not an identifier")
    if isinstance(getattr(obj, "__dict__", None), dict):
        tx.guards.add("NOT_PRESENT", source, f"{name!r} not in {{s}}.__dict__",
                      f"{name!r} not in {source.expr()}.__dict__")
    label = getattr(attr, "__qualname__", None) or getattr(getattr(attr, "fget", None), "__qualname__", name)
    tx.guards.add("ID_MATCH", source, f"type({{s}}).{name} is {{attr}}",
                  f"type({source.expr()}).{name} is {label}", attr=attr)
