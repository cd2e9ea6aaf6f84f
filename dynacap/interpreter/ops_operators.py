"""Opcode handlers of Python's operators: ``BINARY_OP``, ``COMPARE_OP``, ``IS_OP``, ``CONTAINS_OP``, unary ops.

Each pops its operands and pushes what ``values.operators`` (the operators'
semantics over values) answers; nothing else lives here.
"""
from __future__ import annotations

import operator

from ..errors import GraphBreak
from ..values.constant import ConstantValue
from ..values.operators import binary_op, compare_op, contains_op, identical, identical_by_guard, unary_op
from .tracer import handles


@handles("BINARY_OP")
def _binary(tx, ins):
    b = tx.pop()
    a = tx.pop()
    tx.push(binary_op(tx, ins.argrepr, a, b))


@handles("COMPARE_OP")
def _compare(tx, ins):
    b = tx.pop()
    a = tx.pop()
    tx.push(compare_op(tx, ins.argval, a, b))


@handles("IS_OP")
def _is(tx, ins):
    b = tx.pop()
    a = tx.pop()
    same = identical(a, b)
    if same is None:
        same = identical_by_guard(tx, a, b)
    if same is None:
        raise GraphBreak(f"`is` between {a.describe()} and {b.describe()} cannot be decided while capturing")
    tx.push(ConstantValue(same != bool(ins.arg)))


@handles("CONTAINS_OP")
def _contains(tx, ins):
    container = tx.pop()
    item = tx.pop()
    tx.push(ConstantValue(contains_op(tx, item, container) != bool(ins.arg)))


def _unary(symbol, fn):
    def handler(tx, ins):
        tx.push(unary_op(tx, symbol, fn, tx.pop()))

    return handler


handles("UNARY_NEGATIVE")(_unary("-", operator.neg))
handles("UNARY_POSITIVE")(_unary("+", operator.pos))
handles("UNARY_INVERT")(_unary("~", operator.invert))


@handles("UNARY_NOT")
def _not(tx, ins):
    tx.push(ConstantValue(not tx.pop().truth(tx)))
