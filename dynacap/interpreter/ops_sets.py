"""Operators with a set operand: ``BINARY_OP`` (``| & - ^`` and in place), ``COMPARE_OP``, ``CONTAINS_OP``.

Set operands (``values.sets.SetValue``, constant sets/frozensets next to one)
are answered on their key sets, so results are CPython's; any other operands
go on to the general operators (``ops_operators``).  An operator CPython would
refuse (``{1} + {2}``) is a graph break.  No graph nodes are added.
"""
from __future__ import annotations

from ..errors import GraphBreak
from ..values.constant import ConstantValue
from ..values.sets import SetValue, binary, compare, is_set_like
from . import ops_operators
from .tracer import HANDLERS, handles

_GENERAL = {name: HANDLERS[name] for name in ("BINARY_OP", "COMPARE_OP", "CONTAINS_OP")}
assert all(handler.__module__ == ops_operators.__name__ for handler in _GENERAL.values())


def _involves_set(tx) -> bool:
    return isinstance(tx.stack[-1], SetValue) or isinstance(tx.stack[-2], SetValue)


@handles("BINARY_OP")
def _binary(tx, ins):
    if not _involves_set(tx):
        return _GENERAL["BINARY_OP"](tx, ins)
    b = tx.pop()
    a = tx.pop()
    if not (is_set_like(a) and is_set_like(b)):
        raise GraphBreak(f"`{ins.argrepr}` between {a.describe()} and {b.describe()} is not supported")
    tx.push(binary(tx, ins.argrepr, a, b))


@handles("COMPARE_OP")
def _compare(tx, ins):
    if not _involves_set(tx):
        return _GENERAL["COMPARE_OP"](tx, ins)
    b = tx.pop()
    a = tx.pop()
    result = compare(tx, ins.argval, a, b)
    if result is None:
        raise GraphBreak(f"comparing {a.describe()} {ins.argval} {b.describe()} is not supported")
    tx.push(result)


@handles("CONTAINS_OP")
def _contains(tx, ins):
    container, item = tx.stack[-1], tx.stack[-2]
    if isinstance(container, SetValue):
        found = container.contains(item, tx)
    elif is_set_like(container) and not item.is_constant():
        # `t in {1, 2}` (a frozenset constant): a tensor or object is none of its constant members.
        found = SetValue(container.as_constant()).contains(item, tx)
    else:
        return _GENERAL["CONTAINS_OP"](tx, ins)
    tx.popn(2)
    tx.push(ConstantValue(found != bool(ins.arg)))
