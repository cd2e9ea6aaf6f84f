"""``EnumMemberValue``: a member of an ``enum.Enum`` class (``Color.RED``), a constant of the trace.

Members are singletons made when their class is: one read from the frame is guarded by identity, and
``Color(2)`` / ``Color["RED"]`` are lookups in the class's own member maps (no ``_missing_`` or metaclass
``__call__`` runs).  ``.name`` and ``.value`` are read from the member's ``__dict__``; methods and
properties the user wrote are inlined with the member bound.  A member folds as a constant (``==``,
``is``, hashing, formatting) only when its class defines no special method in Python outside the
``enum`` module: such a method would run at capture time.
"""
from __future__ import annotations

import enum
import types

from ..errors import GraphBreak
from .base import Value
from .constant import ConstantValue, is_literal


def is_enum_member(obj) -> bool:
    """Whether ``obj`` is a member of an enum class (by its type's metaclass: no user code runs)."""
    return issubclass(type(type(obj)), enum.EnumMeta) and type(obj) is not type


def user_dunders(cls: type) -> bool:
    """Whether a special method (or an enum's ``_missing_``, which ``Flag``'s operators reach) written in
    Python outside ``enum``/``collections`` (their generated ones) is on ``cls``'s MRO: folding an instance
    as a constant would run it at capture time."""
    for klass in type.__dict__["__mro__"].__get__(cls):
        for name, attr in type.__dict__["__dict__"].__get__(klass).items():
            if isinstance(attr, (classmethod, staticmethod)):
                attr = attr.__func__
            hook = name.startswith("__") and name.endswith("__") or name == "_missing_"  # Cls(v) may call _missing_
            if hook and type(attr) is types.FunctionType and attr.__module__ not in ("enum", "collections") \
                    and name not in ("__init__", "__new__", "__init_subclass__"):
                return True
    return False


def member_value(tx, member, source=None) -> Value:
    """The value of an enum member; guarded by identity where it came from the frame."""
    if source is not None:
        tx.guards.id_match(source, member)
    return EnumMemberValue(member, source)


def lookup_member(cls: type, key: Value, by_name: bool) -> Value:
    """``Cls(value)`` or ``Cls[name]``: the member found in the class's own maps, else a break."""
    if not key.is_constant() or not is_literal(key.as_constant()):
        raise GraphBreak(f"looking up a member of {cls.__qualname__} by {key.describe()}")
    table = type.__dict__["__dict__"].__get__(cls).get("_member_map_" if by_name else "_value2member_map_", {})
    found = table.get(key.as_constant()) if type(table) is dict else None
    if found is None:
        how = "name" if by_name else "value"
        raise GraphBreak(f"{cls.__qualname__} has no member of {how} {key.as_constant()!r} (its _missing_ hook or "
                         "an error decides at run time)")
    return EnumMemberValue(found)


class EnumMemberValue(Value):
    def __init__(self, member, source=None):
        self.member = member
        self.source = source

    def describe(self):
        return f"{type(self.member).__qualname__}.{self.member.__dict__.get('_name_', '?')}"

    def python_type(self):
        return type(self.member)

    def real_object(self):
        return self.member

    def is_constant(self):
        return not user_dunders(type(self.member))

    def as_constant(self):
        if not self.is_constant():
            raise GraphBreak(f"{self.describe()}: its class has special methods of its own (they would run while "
                             "capturing)")
        return self.member

    def truth(self, tx):
        if class_has(type(self.member), "__bool__") or class_has(type(self.member), "__len__"):
            return bool(self.as_constant())
        return True

    def getattr(self, tx, name):
        from .functions import BoundMethodValue, UserFunctionValue
        from .objects import _MISSING, class_lookup

        own = self.member.__dict__
        if name in ("name", "value", "_name_", "_value_"):
            value = own.get("_" + name.strip("_") + "_")
            if not is_literal(value):
                raise GraphBreak(f"`.{name}` of {self.describe()} is a {type(value).__name__}, not a constant")
            return ConstantValue(value)
        attr = class_lookup(type(self.member), name)
        if type(attr) is types.FunctionType and attr.__module__ != "enum":
            return BoundMethodValue(UserFunctionValue(attr), self)
        if type(attr) is property and attr.fget is not None:
            calling, tx.calling = tx.calling, False  # the getter's result is not a CALL's
            try:
                return UserFunctionValue(attr.fget).call(tx, [self], {})
            finally:
                tx.calling = calling
        if name in own and is_literal(own[name]):
            return ConstantValue(own[name])
        if attr is not _MISSING and is_literal(attr):
            return ConstantValue(attr)
        raise GraphBreak(f"attribute `.{name}` of {self.describe()} is not supported")

    def reconstruct(self, cg):
        if self.source is not None:
            cg.extend(self.source.emit())
        else:
            cg.load_const(self.member)


def class_has(cls: type, name: str) -> bool:
    from .objects import _MISSING, class_lookup

    return class_lookup(cls, name) is not _MISSING
