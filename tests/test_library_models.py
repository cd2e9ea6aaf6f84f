"""Models of library functions traced in their place (``dynacap/models``): itertools, ``functools.reduce``,
``functools.partial``, function attributes.  Each against the real library function, eager vs captured, then
one graph.
"""
from __future__ import annotations

import functools
import itertools
import operator

import pytest
import torch
import torch.nn.functional as F

from differential import assert_fully_captured, explain_captured, run_differential

CASES = {
    "islice_stop": lambda xs: list(itertools.islice(xs, 2)),
    "islice_range": lambda xs: list(itertools.islice(xs, 1, None, 2)),
    "islice_start_stop": lambda xs: list(itertools.islice(xs, 1, 3)),
    "pairwise": lambda xs: [a - b for a, b in itertools.pairwise(xs)],
    "combinations": lambda xs: [a * b for a, b in itertools.combinations(xs, 2)],
    "combinations_too_many": lambda xs: list(itertools.combinations(xs, 9)),
    "product": lambda xs: [a + b for a, b in itertools.product(xs[:2], xs[1:])],
    "product_repeat": lambda xs: [len(p) for p in itertools.product([1, 2], repeat=3)],
    "permutations": lambda xs: [a - b for a, b in itertools.permutations(xs[:3], 2)],
    "accumulate": lambda xs: list(itertools.accumulate(xs)),
    "accumulate_func": lambda xs: list(itertools.accumulate(xs, torch.maximum, initial=xs[0] * 0)),
    "starmap": lambda xs: list(itertools.starmap(torch.add, zip(xs, xs[1:]))),
    "zip_longest": lambda xs: [(a, b) for a, b in itertools.zip_longest(xs, [1, 2], fillvalue=0)],
    "repeat": lambda xs: [t * 2 for t in itertools.repeat(xs[0], 3)],
    "chain_from_iterable": lambda xs: list(itertools.chain.from_iterable([xs[:1], xs[2:]])),
    "reduce": lambda xs: functools.reduce(operator.add, xs),
    "reduce_initial": lambda xs: functools.reduce(lambda a, b: a * b, xs, torch.ones(3)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_model_gives_the_library_result(name):
    fn = CASES[name]
    xs = [torch.randn(3) for _ in range(4)]
    run_differential(fn, xs)
    out = explain_captured(fn, xs)
    assert out.graph_break_count == 0 and out.graph_count <= 1, out


def test_models_raise_as_the_library_does():
    def fn(xs):
        return functools.reduce(operator.add, [x for x in xs if x.numel() > 99])

    run_differential(fn, [torch.randn(3)])

    def negative(xs):
        return list(itertools.combinations(xs, -1))

    run_differential(negative, [torch.randn(3)])


ACT = functools.partial(F.leaky_relu, negative_slope=0.1)


def test_partial_from_the_frame_and_made_in_the_trace():
    def fn(x, scale):
        double = functools.partial(torch.mul, other=2.0)
        nested = functools.partial(functools.partial(torch.add, x), alpha=scale)
        return ACT(x) + double(x) + nested(x), nested.keywords, nested.args[0] is x

    out = run_differential(fn, torch.randn(3), 0.5)
    assert out.compiles_first == 1
    assert_fully_captured(fn, torch.randn(3), 0.5)

    def escapes(x):
        return functools.partial(torch.add, x, alpha=2.0)

    import dynacap

    made = dynacap.optimize(escapes)(torch.ones(2))
    assert type(made) is functools.partial and made.keywords == {"alpha": 2.0}
    torch.testing.assert_close(made(torch.ones(2)), torch.full((2,), 3.0))


def _table(n):
    return _table.cache[:n]


_table.cache = torch.arange(8.0)


def test_function_attribute_read_through_the_function():
    def fn(x):
        return x + _table(3)

    run_differential(fn, torch.randn(3))
    assert_fully_captured(fn, torch.randn(3))
    import dynacap

    compiled = dynacap.optimize(fn)
    x = torch.zeros(3)
    old = _table.cache
    try:
        _table.cache = torch.full((8,), 5.0)  # a changed attribute: the guard notices
        torch.testing.assert_close(compiled(x), torch.full((3,), 5.0))
    finally:
        _table.cache = old


@functools.lru_cache(maxsize=None)
def _available(feature):
    return feature in ("a", "b")


def test_the_users_lru_cached_function_runs_eagerly():
    """Its cache must see every call (statistics, the effects of a miss): called once at capture time, it would
    miss every later one."""
    def fn(x):
        return x * 2 if _available("a") else x

    run_differential(fn, torch.randn(3))
    out = explain_captured(fn, torch.randn(3))
    assert out.graph_break_count == 1 and "lru_cache" in out.break_reasons[0].reason


def test_an_installed_librarys_lru_cached_function_of_constants_runs_for_real():
    """transformers' version checks: the library's promise that the result depends on the arguments only."""
    import_utils = pytest.importorskip("transformers.utils.import_utils")

    def fn(x):
        return x * 2 if import_utils.get_torch_major_and_minor_version() else x

    run_differential(fn, torch.randn(3))
    assert_fully_captured(fn, torch.randn(3))
