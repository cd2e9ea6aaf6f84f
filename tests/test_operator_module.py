"""``operator``'s functions and callables as models (``dynacap/models/operators.py``), eager vs captured:
results, containers changed in place (``iadd`` on a list, ``setitem`` on a dict input), the fallback of
in-place functions to the binary operator, errors, and what must still break.
"""
from __future__ import annotations

import operator

import pytest
import torch

import dynacap
from differential import CountingBackend, explain_captured, run_differential

CASES = {
    "arithmetic": lambda x: (operator.add(x, 1) * operator.mul(2, 3) - operator.neg(x) + operator.truediv(x, 2),
                             operator.floordiv(7, 2), operator.mod(7, 3), operator.pow(2, 5), operator.lshift(1, 3),
                             operator.rshift(16, 2), operator.and_(6, 3), operator.or_(6, 3), operator.xor(6, 3),
                             operator.inv(5), operator.invert(5), operator.pos(-2), operator.abs(-3)),
    "tensor_operators": lambda x: (operator.matmul(x, x), operator.abs(x), operator.sub(x, 1), operator.pow(x, 2),
                                   operator.__add__(x, x)),
    "comparisons": lambda x: x + operator.lt(1, 2) + operator.eq("a", "a") * 2 + operator.truth([]) * 4
    + operator.not_(0) * 8 + operator.ge(3, 3) * 16 + operator.ne(1, 1) * 32,
    "tensor_comparison": lambda x: operator.gt(x, 0) | operator.le(x, -1),
    "identity": lambda x: (x + 1, operator.is_(x, x), operator.is_not(None, None)),
    "sequences": lambda x: (x * operator.length_hint([1, 2, 3]), operator.concat([1], [2]), operator.concat((1,), (x,)),
                            operator.contains([1, 2], 2), operator.countOf([1, 2, 1], 1), operator.indexOf("abc", "c"),
                            operator.getitem([1, 2, 3], 1), operator.getitem(x, 0)),
    "length_hint_tensor": lambda x: (x + 1, operator.length_hint(x)),
    "call": lambda x: operator.call(torch.add, x, 2, alpha=3),
    "itemgetter": lambda x: (sorted([(x, 3), (x * 2, 1)], key=operator.itemgetter(1))[0][0],
                             operator.itemgetter(0, 2)([1, 2, 3]), operator.itemgetter("k")({"k": x})),
    "attrgetter": lambda x: (operator.attrgetter("shape")(x)[0] * x, operator.attrgetter("real.shape", "ndim")(x)),
    "methodcaller": lambda x: (operator.methodcaller("mul", 3)(x), operator.methodcaller("split", ",")("a,b"),
                               operator.methodcaller("sum", dim=0)(x)),
    "inplace_tensor": lambda x: (lambda y: (operator.iadd(y, 1), operator.imul(y, 2), y))(x.clone()),
    "inplace_numbers": lambda x: (x + 1, operator.iadd(1, 2), operator.isub(5, 1), operator.ipow(2, 3),
                                  operator.ifloordiv(7, 2), operator.itruediv(1, 4), operator.ior(1, 2),
                                  operator.iconcat([1], (2,))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_model_gives_the_operator_result(name):
    fn = CASES[name]
    run_differential(fn, torch.randn(3))
    out = explain_captured(fn, torch.randn(3))
    assert out.graph_break_count == 0 and out.graph_count <= 1, out


def test_inplace_changes_the_container_and_setitem_an_input():
    """``iadd`` on a list extends it in place (the caller's list), on a tuple makes a new one; ``setitem``
    and ``delitem`` on a dict input are changes eager's caller sees."""
    def fn(x, items, table):
        same = operator.iadd(items, [x])
        pair = (1,)
        grown = operator.iadd(pair, (2,))
        operator.setitem(table, "t", x * 2)
        operator.delitem(table, "gone")
        return same is items, grown, pair, len(items)

    out = run_differential(fn, torch.randn(3), [1], {"gone": 0}, check_cache=False)
    assert out.compiles_first == 1


class Meters:
    def __init__(self, v):
        self.v = v

    def __add__(self, other):
        return Meters(self.v + other)


def test_inplace_falls_back_to_the_binary_operator():
    def fn(x, m):
        out = operator.iadd(m, 2)
        return x * out.v, out is m

    run_differential(fn, torch.randn(3), Meters(1.0))


class BadHint:
    def __init__(self, hint):
        self.hint = hint

    def __length_hint__(self):
        return self.hint


@pytest.mark.parametrize("call", [
    lambda x: operator.length_hint(BadHint("x")),
    lambda x: operator.length_hint(BadHint(-1)),
    lambda x: operator.concat(1, 2),
    lambda x: operator.indexOf([1, 2], 5),
    lambda x: operator.itemgetter(),
    lambda x: operator.attrgetter(1),
    lambda x: operator.methodcaller(3),
    lambda x: operator.getitem([1], 4),
    lambda x: operator.length_hint([], "a"),
], ids=["hint_not_int", "hint_negative", "concat", "indexOf", "itemgetter", "attrgetter", "methodcaller", "getitem", "length_hint"])
def test_errors_are_the_operator_errors(call):
    def fn(x):
        try:
            call(x)
        except (TypeError, ValueError, IndexError) as e:
            return x + 1, type(e).__name__, str(e)
        return x

    run_differential(fn, torch.randn(3))


def test_length_hint_of_an_iterator_breaks_with_eager_result():
    """An iterator's type is not known at capture time (a list's, a generator's): a break, eager's answer."""
    def fn(x):
        return x + 1, operator.length_hint(iter([1, 2, 3]))

    run_differential(fn, torch.randn(3))
    with pytest.raises(dynacap.Unsupported):
        dynacap.optimize(fn, backend=CountingBackend(), fullgraph=True)(torch.ones(1))


def test_a_getter_that_leaves_the_graph_is_the_real_one():
    """A getter made in the trace is a function there; leaving the graph it is made again as the real
    ``operator.itemgetter`` (from its cells): one graph."""
    def fn(x):
        return x + 1, operator.itemgetter(1)

    counting = CountingBackend()
    result = dynacap.optimize(fn, backend=counting, fullgraph=True)(torch.ones(1))[1]
    assert type(result) is operator.itemgetter and result([5, 6]) == 6 and counting.compiles == 1


SECOND = operator.itemgetter(1)
FIRST_TWO = operator.itemgetter(0, 1)
SHAPE_AND_DIM = operator.attrgetter("shape", "ndim")
SCALED = operator.methodcaller("mul", 3)
SUMMED = operator.methodcaller("sum", dim=0)


def test_getters_from_the_frame_are_called_by_their_model():
    """Objects made outside the graph (guarded by identity): their call is traced from their own arguments."""
    def fn(x):
        pairs = [(x, 2), (x * 2, 1)]
        return sorted(pairs, key=SECOND)[0][0], FIRST_TWO("abc"), SHAPE_AND_DIM(x), SCALED(x), SUMMED(x)

    out = run_differential(fn, torch.randn(3))
    assert out.compiles_first == 1
    dynacap.optimize(fn, backend=CountingBackend(), fullgraph=True)(torch.randn(3))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_backends(backend):
    def fn(x):
        y = operator.iadd(x.clone(), 1)
        return operator.methodcaller("relu")(operator.itemgetter(0)([y, x]))

    out = run_differential(fn, torch.randn(3), backend=CountingBackend(backend))
    assert out.compiles_first == 1
