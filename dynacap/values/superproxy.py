"""``SuperValue``: the proxy made by ``super()`` inside an inlined method.

Attribute lookups walk the MRO of the start class (``type(self)``, or the class itself when the
second argument is one: ``super()`` in a classmethod or ``__new__``) past the class the method was
defined in, as CPython's ``super_getattro`` does, and bind what they find by the descriptor protocol
(``attr.__get__(obj, start)``, ``obj`` None for a class): methods are inlined with ``self`` bound,
classmethods with the class, properties' getters and Python ``__get__`` traced; names found nowhere
are the proxy's own (``__thisclass__``, ``__self__``, ``__self_class__``).  A method of a built-in
``torch.nn`` layer (``super().forward(x)`` in a subclass of ``nn.Linear``) may be inlined although its
file is torch's.  The MRO itself is covered by the guards on ``self`` (identity for modules, type
for plain objects).
"""
from __future__ import annotations

import inspect

from ..errors import GraphBreak
from .base import Value
from .constant import ConstantValue
from .objects import (_BUILTIN_METHOD_TYPES, GenericGetattrValue, GenericSetattrValue, ObjectValue, builtin_dict_get,
                      modelled_function, modelled_method)


class SuperValue(Value):
    """``super(cls, second)``: ``second`` an instance of ``cls`` (methods bind to it) or a subclass of it
    (``super()`` in a classmethod or ``__new__``: methods bind to nothing, classmethods to the class)."""

    def __init__(self, cls: type, self_value: Value):
        self.cls = cls
        self.self_value = self_value

    def describe(self):
        return f"super({self.cls.__name__}, ...)"

    def python_type(self):
        return super

    def start(self) -> tuple[type, bool]:
        """CPython's ``supercheck``: the class whose MRO is walked, and whether ``second`` is that class."""
        second = self.self_value
        if second.is_constant() and isinstance(second.as_constant(), type) \
                and issubclass(second.as_constant(), self.cls):
            return second.as_constant(), True
        kind = second.python_type()
        if issubclass(kind, self.cls):
            return kind, False
        raise GraphBreak(f"super(type, obj): {second.describe()} is not an instance or subtype of "
                         f"{self.cls.__name__} (TypeError at run time)")

    def getattr(self, tx, name):
        from .classes import made_class, super_attribute
        from .wrap import wrap

        start, is_class = self.start()
        if name != "__class__":  # ``super().__class__`` is the proxy's own (``super_getattro`` skips it)
            mro = type.__dict__["__mro__"].__get__(start)
            if self.cls not in mro:
                raise GraphBreak(f"super(): {self.cls.__name__} is not a base of {start.__name__} "
                                 "(TypeError at run time)")
            for klass in mro[mro.index(self.cls) + 1:]:
                if made_class(tx, klass) is not None:
                    found = super_attribute(tx, klass, name, self.self_value)
                    if found is not None:
                        return found
                written = tx.attribute_override(klass, name)  # ``Base.name = v`` earlier in the trace
                if written is not None:
                    return self._bind_written(name, written, is_class)
                own = type.__dict__["__dict__"].__get__(klass)
                if name in own:
                    return self._bind(tx, klass, name, own[name], start, is_class)
        # Not in the MRO: the proxy's own attributes.
        if name == "__thisclass__":
            return wrap(tx, self.cls, None)
        if name == "__self__":
            return self.self_value
        if name == "__self_class__":
            return self.self_value if is_class else wrap(tx, start, None)
        if name == "__class__":
            return wrap(tx, super, None)
        raise GraphBreak(f"super() has no attribute {name!r} (AttributeError at run time)")

    def _bind_written(self, name: str, written: Value, is_class: bool) -> Value:
        """A class attribute the trace assigned (``class_state``): a function binds to ``self``."""
        from .base import DELETED
        from .functions import BoundMethodValue, UserFunctionValue

        if written is DELETED or isinstance(written, ObjectValue):
            raise GraphBreak(f"super().{name}: the captured code changed it on the class")
        if isinstance(written, UserFunctionValue) and not is_class:
            return BoundMethodValue(written, self.self_value)
        return written

    def _bind(self, tx, klass: type, name: str, attr, start: type, is_class: bool) -> Value:
        """``attr.__get__(obj, start)``, ``obj`` being None when ``super()``'s second argument is the class."""
        from .functions import BoundMethodValue, UserFunctionValue
        from .wrap import wrap

        instance = self.self_value
        if inspect.isfunction(attr):
            function = UserFunctionValue(modelled_function(attr))
            function.library_ok = True
            if is_class:
                return function
            return modelled_method(attr, instance) or BoundMethodValue(function, instance)
        if isinstance(attr, (classmethod, staticmethod)) and inspect.isfunction(attr.__func__):
            function = UserFunctionValue(attr.__func__)
            function.library_ok = True
            if isinstance(attr, staticmethod):
                return function
            owner = instance if is_class else getattr(instance, "class_value", None) or wrap(tx, start, None)
            return BoundMethodValue(function, owner)
        if isinstance(attr, property) and not is_class:
            if attr.fget is None:
                raise GraphBreak(f"super().{name}: the property has no getter (AttributeError at run time)")
            getter = UserFunctionValue(attr.fget)
            getter.library_ok = True
            calling, tx.calling = tx.calling, False  # the getter's result is not a CALL's
            try:
                return getter.call(tx, [instance], {})
            finally:
                tx.calling = calling
        if name == "__new__" and attr is _OBJECT_NEW:
            # A static method: the caller passes the class itself (``super().__new__(cls)``).
            from . import instances

            if hasattr(instances, "ObjectNewValue"):
                return instances.ObjectNewValue()
        if name == "__new__" and attr is tuple.__dict__["__new__"]:
            from .subclasses import TupleNewValue

            return TupleNewValue()  # ``super().__new__(cls, items)`` in a tuple subclass
        if name == "__getattribute__" and attr is _GENERIC_GETATTRIBUTE.get(klass) and not is_class:
            if isinstance(instance, ObjectValue):
                # ``super().__getattribute__(k)`` in a class's own hook: the generic lookup.
                return GenericGetattrValue(instance)
        if name == "__setattr__" and attr is _OBJECT_SETATTR and isinstance(instance, ObjectValue) and not is_class:
            # ``super().__setattr__(k, v)`` ending a class's own hook: the generic store.
            return GenericSetattrValue(instance)
        if attr is _DICT_GET and isinstance(instance, ObjectValue) and instance.source is not None \
                and issubclass(instance.python_type(), dict):
            return _BoundBuiltin(builtin_dict_get, instance, "super().get")
        if type(attr) in _BUILTIN_METHOD_TYPES and isinstance(instance, ObjectValue) and not is_class \
                and not klass.__flags__ & _HEAP_TYPE:
            # ``super().__setitem__(k, v)`` in a dict subclass: the built-in base's, on the items.
            bound = instance.base_method(tx, name)
            if bound is not None:
                return bound
        if attr is _OBJECT_INIT and not is_class:
            return _BoundBuiltin(_object_init, instance, "super().__init__")
        if name == "__init__" and attr in _PLAIN_EXCEPTION_INITS and not is_class:
            from .exceptions import ExceptionValue

            if isinstance(instance, ExceptionValue):
                return _BoundBuiltin(_exception_init, instance, "super().__init__")
            if attr in _ARGS_INITS and isinstance(instance, ObjectValue) and instance.source is not None \
                    and isinstance(instance.obj, BaseException):
                return _BoundBuiltin(_frame_exception_init, instance, "super().__init__")
        getter = _class_attribute(type(attr), "__get__")
        if inspect.isfunction(getter) and not is_class:
            # A descriptor written in Python: its ``__get__(obj, start)`` traced.
            calling, tx.calling = tx.calling, False
            try:
                return UserFunctionValue(getter).call(tx, [wrap(tx, attr, None), instance, wrap(tx, start, None)], {})
            finally:
                tx.calling = calling
        if getter is not None or isinstance(attr, property):
            raise GraphBreak(f"super().{name} is a {type(attr).__name__}")
        return wrap(tx, attr, None)


def _class_attribute(cls: type, name: str):
    """``name`` in the class dictionaries along ``cls``'s MRO, or None."""
    from .objects import _MISSING, class_lookup

    found = class_lookup(cls, name)
    return None if found is _MISSING else found


#: Built-in classes whose ``__getattribute__`` is CPython's generic lookup (``PyObject_GenericGetAttr``).
_GENERIC_GETATTRIBUTE = {klass: klass.__dict__["__getattribute__"]
                         for klass in (object, dict, list, tuple, set, frozenset, int, float, str, bytes)}


_HEAP_TYPE = 1 << 9
_DICT_GET = dict.__dict__["get"]
_OBJECT_INIT = object.__dict__["__init__"]
_OBJECT_NEW = object.__dict__["__new__"]
_OBJECT_SETATTR = object.__dict__["__setattr__"]


def _object_init(tx, self_value, args):
    """``object.__init__(self)``: does nothing (extra arguments are a TypeError at run time)."""
    if args:
        raise GraphBreak("object.__init__() takes exactly one argument (TypeError at run time)")
    return ConstantValue(None)


#: ``__init__`` of the built-in exceptions whose C ``tp_init`` is ``BaseException_init`` (it sets ``args``,
#: nothing else; ``OSError``, ``ImportError``, ``AttributeError``, ``StopIteration``... keep more state).
_PLAIN_EXCEPTION_INITS = {k.__dict__["__init__"] for k in (
    BaseException, Exception, ValueError, TypeError, RuntimeError, ArithmeticError, ZeroDivisionError,
    OverflowError, FloatingPointError, LookupError, IndexError, KeyError, AssertionError, NotImplementedError,
    RecursionError, BufferError, EOFError, MemoryError, ReferenceError, UnicodeError, Warning, UserWarning,
    DeprecationWarning, RuntimeWarning) if "__init__" in k.__dict__}


def _exception_init(tx, exception, args):
    """``BaseException.__init__(self, *args)``: ``args`` becomes the exception's arguments."""
    exception.args = list(args)
    return ConstantValue(None)


#: ``BaseException.__init__`` itself (``Exception``'s is the same C function): it only sets ``args``.
_ARGS_INITS = {BaseException.__dict__["__init__"], Exception.__dict__["__init__"]}


def _frame_exception_init(tx, exception, args):
    """``BaseException.__init__`` on an exception object from the frame (its class's ``__init__`` captured on
    its own): the store of ``args`` (a getset), read back by the trace and replayed after the graph."""
    from .containers import TupleValue

    tx.record_setattr(exception, "args", TupleValue(list(args)), slot=True)
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
        made = SuperValue(args[0].as_constant(), args[1])
        made.start()  # CPython checks the pair when the proxy is made
        return made
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
