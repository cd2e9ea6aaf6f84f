"""``SuperValue``: the proxy made by ``super()`` inside an inlined method.

Attribute lookups walk the MRO of ``self``'s class past the class the
method was defined in, as CPython does.  Methods found there are inlined
with ``self`` bound; a method of a built-in ``torch.nn`` layer (``super()
.forward(x)`` in a subclass of ``nn.Linear``) may be inlined although its
file is torch's.  The MRO itself is covered by the guards on ``self``
(identity for modules, type for plain objects).
"""
from __future__ import annotations

import inspect

from ..errors import GraphBreak
from .base import Value
from .constant import ConstantValue
from .objects import _BUILTIN_METHOD_TYPES, GenericGetattrValue, GenericSetattrValue, ObjectValue, builtin_dict_get, modelled_method


class SuperValue(Value):
    def __init__(self, cls: type, self_value: Value):
        self.cls = cls
        self.self_value = self_value

    def describe(self):
        return f"super({self.cls.__name__}, ...)"

    def getattr(self, tx, name):
        from .functions import BoundMethodValue, UserFunctionValue
        from .wrap import wrap

        mro = self.self_value.python_type().__mro__
        if self.cls not in mro:
            raise GraphBreak(f"super(): {self.cls.__name__} is not a base of {mro[0].__name__} (TypeError at run time)")
        for klass in mro[mro.index(self.cls) + 1:]:
            if name not in klass.__dict__:
                continue
            attr = klass.__dict__[name]
            if inspect.isfunction(attr):
                modelled = modelled_method(attr, self.self_value)
                if modelled is not None:
                    return modelled
                function = UserFunctionValue(attr)
                function.library_ok = True
                return BoundMethodValue(function, self.self_value)
            if isinstance(attr, property) and attr.fget is not None:
                getter = UserFunctionValue(attr.fget)
                getter.library_ok = True
                return getter.call(tx, [self.self_value], {})
            if name == "__getattribute__" and attr is _GENERIC_GETATTRIBUTE.get(klass):
                if isinstance(self.self_value, ObjectValue):
                    # ``super().__getattribute__(k)`` in a class's own hook: the generic lookup.
                    return GenericGetattrValue(self.self_value)
            if name == "__setattr__" and attr is _OBJECT_SETATTR and isinstance(self.self_value, ObjectValue):
                # ``super().__setattr__(k, v)`` ending a class's own hook: the generic store.
                return GenericSetattrValue(self.self_value)
            if attr is _DICT_GET and isinstance(self.self_value, ObjectValue) and self.self_value.source is not None \
                    and issubclass(self.self_value.python_type(), dict):
                return _BoundBuiltin(builtin_dict_get, self.self_value, "super().get")
            if type(attr) in _BUILTIN_METHOD_TYPES and isinstance(self.self_value, ObjectValue) \
                    and not klass.__flags__ & _HEAP_TYPE:
                # ``super().__setitem__(k, v)`` in a dict subclass: the built-in base's, on the items.
                bound = self.self_value.base_method(tx, name)
                if bound is not None:
                    return bound
            if attr is _OBJECT_INIT:
                return _BoundBuiltin(_object_init, self.self_value, "super().__init__")
            if isinstance(attr, (staticmethod, classmethod)) or hasattr(type(attr), "__get__"):
                raise GraphBreak(f"super().{name} is a {type(attr).__name__}")
            return wrap(tx, attr, None)
        raise GraphBreak(f"super() has no attribute {name!r} (AttributeError at run time)")


#: Built-in classes whose ``__getattribute__`` is CPython's generic lookup (``PyObject_GenericGetAttr``).
_GENERIC_GETATTRIBUTE = {klass: klass.__dict__["__getattribute__"]
                         for klass in (object, dict, list, tuple, set, frozenset, int, float, str, bytes)}


_HEAP_TYPE = 1 << 9
_DICT_GET = dict.__dict__["get"]
_OBJECT_INIT = object.__dict__["__init__"]
_OBJECT_SETATTR = object.__dict__["__setattr__"]


def _object_init(tx, self_value, args):
    """``object.__init__(self)``: does nothing (extra arguments are a TypeError at run time)."""
    if args:
        raise GraphBreak("object.__init__() takes exactly one argument (TypeError at run time)")
    return ConstantValue(None)


class _BoundBuiltin(Value):
    """A built-in method of ``self``'s base class reached by ``super()``, modelled by ``handler``."""

    def __init__(self, handler, self_value: Value, label: str):
        self.handler = handler
        self.self_value = self_value
        self.label = label

    def describe(self):
        return self.label

    def call(self, tx, args, kwargs):
        if kwargs:
            raise GraphBreak(f"{self.label}() with keyword arguments")
        return self.handler(tx, self.self_value, args)


def make_super(tx, args: list[Value]) -> SuperValue:
    """``super()`` (zero-argument, from the method's ``__class__`` cell) or ``super(cls, obj)``."""
    if len(args) == 2:
        return SuperValue(args[0].as_constant(), args[1])
    if args:
        raise GraphBreak("super() with one argument")
    box = tx.cells.get("__class__")
    cls = box.get(tx) if box is not None else None
    if cls is None or not tx.code.co_argcount:
        raise GraphBreak("super() outside a method (RuntimeError at run time)")
    first = tx.code.co_varnames[0]
    if first in tx.cells:
        self_value = tx.cells[first].get(tx)
    else:
        self_value = tx.read_local(first)
    if self_value is None:
        raise GraphBreak("super(): the method's first argument is not available")
    return SuperValue(cls.as_constant(), self_value)
