"""Builtins that ask about objects, attributes and namespaces: ``type isinstance callable id super getattr
setattr hasattr delattr vars globals locals dir`` and the ``inspect`` predicates and ``signature``.

Answers come from what the trace knows of a value (its Python type, its class's attributes, guarded where
the answer depends on them); attribute builtins are the same lookups and stores as the ``.`` syntax.  An
answer that depends on state not known at capture time is a break.
"""
from __future__ import annotations

import inspect
import types

from ...errors import GraphBreak
from ..base import Value
from ..constant import ConstantValue
from ..containers import ListValue, SequenceValue
from ..namespaces import frame_globals, frame_locals
from ..protocols import IdValue


#: ``inspect`` predicates that depend only on an object's type: answered from ``python_type()``.
TYPE_PREDICATES = {
    inspect.isfunction: types.FunctionType,
    inspect.isclass: type,
    inspect.ismethod: types.MethodType,
    inspect.ismodule: types.ModuleType,
    inspect.isbuiltin: types.BuiltinFunctionType,
}


class TypePredicateValue(Value):
    """``inspect.isfunction`` and friends, over symbolic values."""

    def __init__(self, fn, source=None):
        self.fn = fn
        self.source = source

    def describe(self):
        return f"`inspect.{self.fn.__name__}`"

    def real_object(self):
        return self.fn

    def call(self, tx, args, kwargs):
        if len(args) != 1 or kwargs:
            raise GraphBreak(f"{self.describe()} takes one argument (TypeError at run time)")
        return ConstantValue(issubclass(args[0].python_type(), TYPE_PREDICATES[self.fn]))


class SignatureValue(Value):
    """``inspect.signature(f)`` of a Python function or a method of one: a constant of the guarded function."""

    def __init__(self, fn=inspect.signature, source=None):
        self.fn = fn
        self.source = source

    def describe(self):
        return "`inspect.signature`"

    def real_object(self):
        return self.fn

    def call(self, tx, args, kwargs):
        from ..functions import BoundMethodValue, UserFunctionValue

        if len(args) != 1 or kwargs:
            raise GraphBreak(f"{self.describe()} with these arguments")
        target = args[0]
        function = target.function if isinstance(target, BoundMethodValue) else target
        if not isinstance(function, UserFunctionValue) or not _plain_wrapped_chain(function.fn):
            raise GraphBreak(f"{self.describe()} of {target.describe()}")
        fn = function.real_object() if function.source is not None else function.fn
        signature = inspect.signature(fn)
        if isinstance(target, BoundMethodValue):
            parameters = list(signature.parameters.values())
            if not parameters or parameters[0].kind not in (inspect.Parameter.POSITIONAL_ONLY,
                                                             inspect.Parameter.POSITIONAL_OR_KEYWORD):
                raise GraphBreak(f"{self.describe()} of {target.describe()}, which binds no first argument")
            signature = signature.replace(parameters=parameters[1:])
        return ConstantValue(signature)


def _plain_wrapped_chain(fn) -> bool:
    """Whether ``inspect.signature`` reads only plain functions' own attributes (``__wrapped__`` chain)."""
    for _ in range(100):
        if type(fn) is not types.FunctionType or "__signature__" in fn.__dict__:
            return False
        if "__wrapped__" not in fn.__dict__:
            return True
        fn = fn.__dict__["__wrapped__"]
    return False


def _type(tx, args, kwargs):
    if len(args) == 1 and not kwargs:
        from ..wrap import wrap

        return wrap(tx, args[0].python_type(), None)
    if len(args) == 3:
        from ..classes import type_call

        return type_call(tx, args, kwargs)  # a class made in the trace, as a ``class`` statement makes one
    return None


def _classinfo(value):
    """The class or (nested) tuple of classes of ``isinstance``'s second argument."""
    if isinstance(value, SequenceValue):
        return tuple(_classinfo(v) for v in value.items)
    if value.is_constant():
        return value.as_constant()
    return value.real_object()  # builtin types (list, dict...) and torch classes


def _isinstance(tx, args, kwargs):
    obj, classes = args
    cls = _classinfo(classes)
    answer = issubclass(obj.python_type(), cls)
    from ..objects import ObjectValue, has_lookup_hooks

    if isinstance(obj, ObjectValue) and has_lookup_hooks(obj.python_type()) and (not answer or any(
            type(c) is not type for c in (cls if type(cls) is tuple else (cls,)))):
        # CPython reads ``obj.__class__`` here (an ABC always does): through the class's own hooks.
        claimed = obj.getattr(tx, "__class__")
        if not (claimed.is_constant() and isinstance(claimed.as_constant(), type)):
            raise GraphBreak(f"isinstance() of {obj.describe()}, whose __class__ is {claimed.describe()}")
        answer = answer or issubclass(claimed.as_constant(), cls)
    return ConstantValue(answer)


def _callable(tx, args, kwargs):
    from . import BuiltinValue
    from ..functions import BoundMethodValue, OpaqueCallableValue, UserFunctionValue
    from ..module import ModuleValue
    from ..torch_ns import TorchValue

    x = args[0]
    if isinstance(x, (UserFunctionValue, BoundMethodValue, OpaqueCallableValue, BuiltinValue, ModuleValue)):
        return ConstantValue(True)
    if isinstance(x, TorchValue):
        return ConstantValue(callable(x.obj))
    if x.is_constant():
        return ConstantValue(callable(x.as_constant()))
    from ..objects import _MISSING, ObjectValue, class_lookup, guard_class_attribute

    if isinstance(x, ObjectValue):
        # CPython: the type has a ``tp_call`` slot, which a class gets from a ``__call__`` along its MRO.
        method = class_lookup(type(x.obj), "__call__")
        if method is not _MISSING:
            guard_class_attribute(tx, x, x.obj, "__call__", method)
        return ConstantValue(method is not _MISSING)
    return None


def _id(tx, args, kwargs):
    if len(args) != 1 or kwargs:
        return None
    return IdValue(args[0], tx.ctx.instructions_run)


def _super(tx, args, kwargs):
    from ..superproxy import make_super

    return make_super(tx, args)


def _getattr(tx, args, kwargs):
    from ..objects import AttributeMissing

    obj, name = args[0], args[1].as_constant()
    try:
        return obj.getattr(tx, name)
    except AttributeMissing as e:
        if len(args) > 2 and not e.frames:
            return args[2]
        raise
    except GraphBreak:
        if len(args) > 2:
            from ..attributes import has_attribute

            if has_attribute(tx, obj, name) is False:
                return args[2]
        raise


def _setattr(tx, args, kwargs):
    """``setattr(obj, "name", v)``: the same store as ``obj.name = v``."""
    if len(args) != 3 or kwargs or not (args[1].is_constant() and isinstance(args[1].as_constant(), str)):
        return None
    args[0].setattr(tx, args[1].as_constant(), args[2])
    return ConstantValue(None)


def _hasattr(tx, args, kwargs):
    from ..attributes import has_attribute

    answer = has_attribute(tx, args[0], args[1].as_constant())
    return None if answer is None else ConstantValue(answer)


def _delattr(tx, args, kwargs):
    """``delattr(obj, "name")`` on an object made in the trace: the same deletion as ``del obj.name``."""
    from ..instances import NewObjectValue

    if len(args) != 2 or kwargs or not isinstance(args[0], NewObjectValue) \
            or not (args[1].is_constant() and type(args[1].as_constant()) is str):
        return None
    args[0].delete_attribute(tx, args[1].as_constant())
    return ConstantValue(None)


def _vars(tx, args, kwargs):
    """``vars(obj)``: ``obj.__dict__`` read as the attribute; ``vars()``: the frame's ``locals()``."""
    from ..objects import ObjectValue

    if not args and not kwargs:
        return frame_locals(tx)
    if len(args) == 1 and not kwargs and isinstance(args[0], ObjectValue):
        return args[0].getattr(tx, "__dict__")
    return None


def _globals(tx, args, kwargs):
    return frame_globals(tx) if not args and not kwargs else None


def _locals(tx, args, kwargs):
    return frame_locals(tx) if not args and not kwargs else None


def _dir(tx, args, kwargs):
    """``dir()``: the sorted names of the frame's ``locals()`` (called for real, it would list dynacap's own)."""
    if args or kwargs:
        return None
    return ListValue([ConstantValue(name) for name in sorted(frame_locals(tx).items)])


HANDLERS = {
    "type": _type,
    "isinstance": _isinstance,
    "callable": _callable,
    "id": _id,
    "super": _super,
    "getattr": _getattr,
    "setattr": _setattr,
    "hasattr": _hasattr,
    "delattr": _delattr,
    "vars": _vars,
    "globals": _globals,
    "locals": _locals,
    "dir": _dir,
}
