"""Builtin constructors of containers and scalars: ``tuple list set frozenset dict OrderedDict defaultdict
int float str bool`` and ``dict.fromkeys``.

A container built in the trace is a tracked value of the trace (``values.containers``, ``values.sets``);
``dict()`` reads its argument as CPython's ``dict_update_arg`` does.  A scalar of a tensor reads the tensor's
value into Python, a break unless ``config.capture_scalar_outputs``; of a user object, its special method
(``__int__``, ``__str__``...) is traced.
"""
from __future__ import annotations

import collections

from ...errors import GraphBreak
from ..base import Value
from ..constant import ConstantValue
from ..containers import DictValue, IteratorValue, ListValue, TupleValue
from ..functions import make_partial
from ..iterators import PullIterator
from ..protocols import constant_protocol


def _sequence_ctor(container):
    def handler(tx, args, kwargs):
        if kwargs:
            return None
        from ..objects import all_items

        items = all_items(tx, args[0]) if args else []
        return TupleValue(items) if container is tuple else ListValue(items)

    return handler


def _set_ctor(frozen: bool):
    def handler(tx, args, kwargs):
        from ..sets import build_set

        if kwargs or len(args) > 1:
            return None
        return build_set(tx, args[0] if args else None, frozen)

    return handler


def dict_items(tx, args, kwargs) -> dict:
    """The items ``dict(*args, **kwargs)`` holds, by constant key, as CPython's ``dict_update_arg`` reads its
    argument: a dict's items; else, when it has a ``keys`` attribute, ``arg[k]`` for each ``k`` of
    ``arg.keys()`` (a mapping); else its items as pairs."""
    from ..objects import all_items

    items = {}
    if args:
        source = args[0]
        if isinstance(source, DictValue):
            items.update(source.items)
        elif _has_keys(tx, source):
            for key in all_items(tx, source.getattr(tx, "keys").call(tx, [], {})):
                items[key.as_constant()] = source.getitem(tx, key)
        else:
            for i, pair in enumerate(all_items(tx, source)):
                parts = all_items(tx, pair)
                if len(parts) != 2:
                    from ..exceptions import python_error

                    raise python_error(ValueError, f"dictionary update sequence element #{i} has length "
                                       f"{len(parts)}; 2 is required")
                items[parts[0].as_constant()] = parts[1]
    items.update(kwargs)
    return items


def _has_keys(tx, value: Value) -> bool:
    """Whether ``dict(value)`` reads ``value`` as a mapping (it has a ``keys`` attribute, looked up as eager
    does); a ``dict`` subclass whose own ``__getitem__``/``keys`` CPython's fast path would skip is a break."""
    from ..attributes import has_attribute
    from ..objects import ObjectValue, class_lookup

    if isinstance(value, (IteratorValue, PullIterator)):
        return False
    if isinstance(value, ObjectValue):
        cls = type(value.obj)
        if issubclass(cls, dict) and class_lookup(cls, "__iter__") is dict.__iter__ and (
                class_lookup(cls, "__getitem__") is not dict.__getitem__ or class_lookup(cls, "keys") is not dict.keys):
            raise GraphBreak(f"dict() of {value.describe()}: CPython reads its items past its own methods")
        answer = has_attribute(tx, value, "keys")
    else:
        try:
            answer = hasattr(value.python_type(), "keys")
        except GraphBreak:
            answer = None
    if answer is None:
        raise GraphBreak(f"dict() of {value.describe()}: whether it is a mapping is not known at capture time")
    return answer


def _dict(tx, args, kwargs):
    return DictValue(dict_items(tx, args, kwargs))


def _ordered_dict(tx, args, kwargs):
    made = _dict(tx, args, kwargs)
    return DictValue(made.items, dict_type=collections.OrderedDict)


def _defaultdict(tx, args, kwargs):
    """``defaultdict(factory, ...)``: a dict whose missing keys call ``factory`` (a value, or None)."""
    factory = args[0] if args else ConstantValue(None)
    if factory.is_constant() and not (factory.as_constant() is None or callable(factory.as_constant())):
        raise GraphBreak("defaultdict: the first argument must be callable or None (TypeError at run time)")
    made = _dict(tx, args[1:], kwargs)
    return DictValue(made.items, dict_type=collections.defaultdict, default_factory=factory)


class FromKeysValue(Value):
    """``dict.fromkeys(keys, value=None)`` / ``OrderedDict.fromkeys``: every key holding the one ``value``."""

    def __init__(self, dict_type: type):
        self.dict_type = dict_type

    def describe(self):
        return f"{self.dict_type.__name__}.fromkeys"

    def call(self, tx, args, kwargs):
        from ..objects import all_items

        if kwargs or len(args) not in (1, 2):
            raise GraphBreak(f"{self.describe()} takes one or two positional arguments")
        value = args[1] if len(args) > 1 else ConstantValue(None)
        keys = all_items(tx, args[0])
        if not all(k.is_constant() for k in keys):
            raise GraphBreak(f"{self.describe()} with keys not known at capture time")
        return DictValue({k.as_constant(): value for k in keys}, dict_type=self.dict_type)


def _scalar_ctor(kind):
    def handler(tx, args, kwargs):
        from ..tensor import TensorValue

        if args and isinstance(args[0], TensorValue) and kind is not str:
            if len(args) == 1 and not kwargs:
                return args[0].python_number(tx, kind)  # a break unless config.capture_scalar_outputs
            raise GraphBreak(f"`{kind.__name__}()` of a tensor reads its value into Python")
        from ..exceptions import ExceptionValue

        if kind is str and len(args) == 1 and not kwargs and isinstance(args[0], ExceptionValue):
            return args[0].to_text(tx, "str")
        if len(args) == 1 and not kwargs:
            return constant_protocol(tx, kind, f"`{kind.__name__}()`", args[0])  # __float__, __int__, __str__...
        return None

    return handler


def _bool(tx, args, kwargs):
    return ConstantValue(args[0].truth(tx)) if args else ConstantValue(False)


HANDLERS = {
    "tuple": _sequence_ctor(tuple),
    "list": _sequence_ctor(list),
    "set": _set_ctor(False),
    "frozenset": _set_ctor(True),
    "dict": _dict,
    "OrderedDict": _ordered_dict,
    "defaultdict": _defaultdict,
    "partial": make_partial,
    "int": _scalar_ctor(int),
    "float": _scalar_ctor(float),
    "str": _scalar_ctor(str),
    "bool": _bool,
}
