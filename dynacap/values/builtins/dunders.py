"""Builtins that call one special method: ``len abs hash repr format``.

On containers and tensors the answer comes from the value (a length, a graph op); on a user object its
class's method is traced (``__len__``, ``__hash__``...); on constants the builtin runs at capture time.
"""
from __future__ import annotations

import operator

from ...errors import GraphBreak
from ..constant import ConstantValue
from ..containers import DictValue, SequenceValue
from ..protocols import absolute, constant_protocol


def _len(tx, args, kwargs):
    (x,) = args
    if isinstance(x, SequenceValue):
        return ConstantValue(x.length())
    if isinstance(x, DictValue):
        return ConstantValue(len(x.items))
    from ..instance_dicts import NewInstanceDictValue
    from ..numpy_ns import NDArrayValue
    from ..sets import SetValue
    from ..tensor import TensorValue

    if isinstance(x, NDArrayValue):
        return x.length(tx)  # its first size (symbolic where it is); a break for a NumPy scalar
    if isinstance(x, (SetValue, NewInstanceDictValue)):
        return ConstantValue(x.length())
    if isinstance(x, TensorValue):
        if x.fake.dim() == 0:
            raise GraphBreak("len() of a 0-d tensor")
        return x.size_item(tx, 0)
    from ..module import ModuleValue

    if isinstance(x, ModuleValue):
        return x.length(tx)
    from ..objects import ObjectValue

    if isinstance(x, ObjectValue):
        n = x.call_special(tx, "__len__", [], "`len()`")
        if not (n.is_constant() and type(n.as_constant()) is int and n.as_constant() >= 0):
            raise GraphBreak(f"`len()` of {x.describe()}: its __len__ returned {n.describe()}")
        return n
    return None


def _abs(tx, args, kwargs):
    from ..numpy_ns import NDArrayValue, numpy_operator
    from ..tensor import TensorValue

    if len(args) == 1 and not kwargs and isinstance(args[0], NDArrayValue):
        return numpy_operator(tx, operator.abs, [args[0]], "`abs()`")
    if len(args) == 1 and not kwargs and isinstance(args[0], TensorValue):
        return tx.graph.call("call_function", operator.abs, [args[0]], {}, "abs()")
    if len(args) == 1 and not kwargs:
        return absolute(tx, args[0])
    return None


def _hash(tx, args, kwargs):
    """``hash()`` of a constant (computed now, as the run's own hash is), of a user object by its class's
    ``__hash__`` (traced; ``None`` makes it unhashable); of anything else, a break."""
    if len(args) == 1 and not kwargs and args[0].is_constant():
        return None  # called on the constant below
    if len(args) == 1 and not kwargs:
        found = constant_protocol(tx, hash, "`hash()`", args[0])
        if found is not None:
            return found
    raise GraphBreak(f"`hash()` of {args[0].describe() if args else 'nothing'} is not known at capture time")


def _repr(tx, args, kwargs):
    from ..exceptions import ExceptionValue

    if len(args) == 1 and not kwargs and isinstance(args[0], ExceptionValue):
        return args[0].to_text(tx, "repr")
    return constant_protocol(tx, repr, "`repr()`", args[0]) if len(args) == 1 and not kwargs else None


def _format(tx, args, kwargs):
    if kwargs or len(args) not in (1, 2):
        return None
    return constant_protocol(tx, format, "`format()`", *args)


HANDLERS = {
    "len": _len,
    "abs": _abs,
    "hash": _hash,
    "repr": _repr,
    "format": _format,
}
