"""``match`` statements: ``MATCH_MAPPING``, ``MATCH_SEQUENCE``, ``MATCH_KEYS``, ``MATCH_CLASS``, ``GET_LEN``.

Each opcode answers at capture time what CPython's would (``ceval.c``,
``match_keys``/``match_class``), on the values dynacap models: constants,
tuples, lists, dicts, tensors and objects whose attribute reads are traced.
Mapping/sequence tests read the subject's type flags (what CPython reads);
class patterns reuse the modelled ``isinstance`` and attribute reads, so a
class's lookup hooks run as eager runs them.  What CPython would raise
(``TypeError`` for a bad ``__match_args__``, ``ValueError`` for duplicate
keys) is a graph break: the statement then runs eagerly and raises there.
Nothing here adds graph nodes.
"""
from __future__ import annotations

import builtins

from ..errors import GraphBreak
from ..values.builtins import BuiltinValue
from ..values.constant import ConstantValue
from ..values.containers import ABSENT, DictValue, TupleValue
from ..values.objects import AttributeMissing
from .tracer import handles

#: ``Py_TPFLAGS_SEQUENCE`` / ``Py_TPFLAGS_MAPPING``: what MATCH_SEQUENCE/MATCH_MAPPING test.
_SEQUENCE_FLAG = 1 << 5
_MAPPING_FLAG = 1 << 6
#: Classes whose ``case C(x)`` binds the subject itself (``_Py_TPFLAGS_MATCH_SELF``).
_MATCH_SELF = (bool, bytearray, bytes, dict, float, frozenset, int, list, set, str, tuple)


def _has_flag(tx, flag: int) -> ConstantValue:
    # ``type.__flags__`` is read from the type object itself: no user code runs.
    subject_type = tx.stack[-1].python_type()
    return ConstantValue(bool(type.__dict__["__flags__"].__get__(subject_type) & flag))


@handles("MATCH_MAPPING")
def _match_mapping(tx, ins):
    tx.push(_has_flag(tx, _MAPPING_FLAG))


@handles("MATCH_SEQUENCE")
def _match_sequence(tx, ins):
    tx.push(_has_flag(tx, _SEQUENCE_FLAG))


@handles("GET_LEN")
def _get_len(tx, ins):
    """``len(subject)``, the subject staying on the stack: the modelled builtin ``len``."""
    tx.push(BuiltinValue(builtins.len).call(tx, [tx.stack[-1]], {}))


@handles("MATCH_KEYS")
def _match_keys(tx, ins):
    """The values of the mapping pattern's keys, or None if one is missing (``subject.get(key, dummy)``)."""
    keys, subject = tx.stack[-1], tx.stack[-2]
    if not isinstance(subject, DictValue):
        # Any other mapping has its own `get`, called with a private sentinel.
        raise GraphBreak(f"a mapping pattern on {subject.describe()} (only dicts are matched while capturing)")
    found = []
    seen = []
    for key in keys.as_constant():
        if key in seen:
            raise GraphBreak(f"mapping pattern checks duplicate key ({key!r}) (ValueError at run time)")
        seen.append(key)
        value = subject.items.get(key, ABSENT)  # one lookup: ``subject.get(key, dummy)``
        if value is ABSENT:
            tx.push(ConstantValue(None))
            return
        found.append(value)
    tx.push(TupleValue(found))


@handles("MATCH_CLASS")
def _match_class(tx, ins):
    """``case C(p0, p1, k=p2)``: the subject's attributes for the patterns, or None if it does not match."""
    names = tx.pop().as_constant()
    cls_value = tx.pop()
    subject = tx.pop()
    cls = cls_value.as_constant() if cls_value.is_constant() else cls_value.real_object()
    if not isinstance(cls, type):
        raise GraphBreak("called match pattern must be a type (TypeError at run time)")
    if not BuiltinValue(builtins.isinstance).call(tx, [subject, cls_value], {}).as_constant():
        tx.push(ConstantValue(None))
        return
    count = ins.arg
    attributes = []
    if count:
        positional = _match_args(tx, cls, cls_value)
        if positional is None:
            if not issubclass(cls, _MATCH_SELF) or count > 1:
                accepted = 1 if issubclass(cls, _MATCH_SELF) else 0
                raise GraphBreak(f"{cls.__name__}() accepts {accepted} positional sub-pattern"
                                 f"{'' if accepted == 1 else 's'} ({count} given) (TypeError at run time)")
            attributes.append(subject)
            positional = ()
        elif count > len(positional):
            raise GraphBreak(f"{cls.__name__}() accepts {len(positional)} positional sub-pattern"
                             f"{'' if len(positional) == 1 else 's'} ({count} given) (TypeError at run time)")
        wanted = list(positional[:count]) + list(names)
    else:
        wanted = list(names)
    seen = []
    for name in wanted:
        if name in seen:
            raise GraphBreak(f"{cls.__name__}() got multiple sub-patterns for attribute {name!r} "
                             "(TypeError at run time)")
        seen.append(name)
        try:
            attributes.append(subject.getattr(tx, name))
        except AttributeMissing as e:
            if e.frames:  # raised inside an inlined getter: only a break models it
                raise
            tx.push(ConstantValue(None))
            return
    tx.push(TupleValue(attributes))


def _match_args(tx, cls: type, cls_value) -> tuple | None:
    """``cls.__match_args__`` (a tuple of str), or None when the class has none."""
    if type(cls) is not type:
        # A metaclass may answer the read with its own code.
        raise GraphBreak(f"a class pattern on {cls.__name__}, whose metaclass is {type(cls).__name__}")
    if not any("__match_args__" in type.__dict__["__dict__"].__get__(k) for k in cls.__mro__):
        return None
    value = cls_value.getattr(tx, "__match_args__")
    if not value.is_constant() or type(value.as_constant()) is not tuple:
        raise GraphBreak(f"{cls.__name__}.__match_args__ must be a tuple (TypeError at run time)")
    positional = value.as_constant()
    if not all(type(name) is str for name in positional):
        raise GraphBreak(f"{cls.__name__}.__match_args__ elements must be strings (TypeError at run time)")
    return positional
