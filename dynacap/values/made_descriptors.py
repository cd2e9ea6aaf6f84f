"""``staticmethod``, ``classmethod`` and ``property`` made by the captured code (a class body's decorators).

Their functions are values of the trace (closures keep their cells); ``values.classes`` binds them
where a class attribute is read, as the real descriptors' ``__get__`` does.  Rebuilt at run time
around the rebuilt functions when they escape.
"""
from __future__ import annotations

from ..errors import GraphBreak
from .base import Value
from .constant import ConstantValue


class StaticMethodValue(Value):
    """``staticmethod(f)`` made in the trace (``@staticmethod`` in a class body)."""

    kind_type = staticmethod

    def __init__(self, function: Value):
        self.function = function

    def describe(self):
        return f"{self.kind_type.__name__} of {self.function.describe()}"

    def python_type(self):
        return self.kind_type

    def getattr(self, tx, name):
        if name == "__func__":
            return self.function
        return super().getattr(tx, name)

    def bind(self, tx, instance: Value | None, owner: Value) -> Value:
        """What ``__get__`` gives: the function itself."""
        return self.function

    def reconstruct(self, cg) -> None:
        cg.build_once(self, lambda cg: cg.call(self.kind_type, self.function))


class ClassMethodValue(StaticMethodValue):
    """``classmethod(f)`` made in the trace: bound to the class it is reached through."""

    kind_type = classmethod

    def bind(self, tx, instance, owner):
        from .functions import BoundMethodValue

        return BoundMethodValue(self.function, owner)


class PropertyValue(Value):
    """``property(fget, fset, fdel)`` made in the trace, with its ``setter``/``getter``/``deleter``."""

    def __init__(self, fget: Value, fset: Value, fdel: Value, doc: Value):
        self.parts = {"fget": fget, "fset": fset, "fdel": fdel, "__doc__": doc}

    def describe(self):
        return "property created in captured code"

    def python_type(self):
        return property

    def getattr(self, tx, name):
        if name in self.parts:
            return self.parts[name]
        if name in ("setter", "getter", "deleter"):
            return _PropertyCopier(self, {"setter": "fset", "getter": "fget", "deleter": "fdel"}[name])
        return super().getattr(tx, name)

    def accessor(self, part: str, what: str) -> Value:
        accessor = self.parts[part]
        if accessor.is_constant() and accessor.as_constant() is None:
            raise GraphBreak(f"{what}: the property has no {part} (AttributeError at run time)")
        return accessor

    def reconstruct(self, cg) -> None:
        def build(cg):
            cg.call(property, *(self.parts[k] for k in ("fget", "fset", "fdel", "__doc__")))

        cg.build_once(self, build)


class _PropertyCopier(Value):
    """``prop.setter`` (and ``getter``/``deleter``): a copy of the property with that accessor replaced."""

    def __init__(self, prop: PropertyValue, part: str):
        self.prop = prop
        self.part = part

    def describe(self):
        return f"property.{self.part}"

    def call(self, tx, args, kwargs):
        if kwargs or len(args) != 1:
            raise GraphBreak(f"{self.describe()} takes one argument (TypeError at run time)")
        parts = dict(self.prop.parts)
        parts[self.part] = args[0]
        return PropertyValue(parts["fget"], parts["fset"], parts["fdel"], parts["__doc__"])


def make_descriptor(cls: type, args: list[Value], kwargs: dict[str, Value]) -> Value | None:
    """``staticmethod(f)``, ``classmethod(f)``, ``property(...)`` of values of the trace (None: other classes)."""
    if cls is staticmethod or cls is classmethod:
        if kwargs or len(args) != 1:
            raise GraphBreak(f"{cls.__name__}() takes one argument (TypeError at run time)")
        return (StaticMethodValue if cls is staticmethod else ClassMethodValue)(args[0])
    if cls is property:
        names = ("fget", "fset", "fdel", "doc")
        if len(args) > 4 or set(kwargs) - set(names):
            raise GraphBreak("property() with these arguments (TypeError at run time)")
        given = dict(zip(names, args), **kwargs)
        return PropertyValue(*(given.get(n, ConstantValue(None)) for n in names))
    return None
