"""itertools' C iterators as models (``dynacap/models/iteration.py``): count, cycle, groupby, takewhile,
dropwhile, filterfalse, compress, tee.  Eager vs captured: results, the order in which generators they
consume run (their side effects interleave with the consumer's as in eager), errors, one graph.
"""
from __future__ import annotations

import itertools

import pytest
import torch

import dynacap
from differential import CountingBackend, assert_fully_captured, explain_captured, run_differential

CASES = {
    "count_zip": lambda x: [x * i for i, _ in zip(itertools.count(1, 2), range(3))],
    "count_float_step": lambda x: [x * i for i in itertools.islice(itertools.count(0.5, 0.25), 3)],
    "cycle_next": lambda x: (lambda c: x * (next(c) + next(c) + next(c)))(itertools.cycle([1, 2])),
    "cycle_tensors": lambda x: [t * 1 for t in itertools.islice(itertools.cycle([x, x + 1]), 5)],
    "cycle_empty": lambda x: (x, list(itertools.cycle([]))),
    "groupby_str": lambda x: (x * 2, [(k, list(g)) for k, g in itertools.groupby("aabbbcaa")]),
    "groupby_key": lambda x: [(k, len(list(g))) for k, g in itertools.groupby(range(10), lambda v: v // 3)],
    "groupby_groups_skipped": lambda x: (x + 1, [k for k, _ in itertools.groupby([1, 1, 2, 3, 3])]),
    "groupby_stale_group": lambda x: (x + 1, [list(g) for _, g in list(itertools.groupby("aabcc"))]),
    "groupby_tensors": lambda x: [sum(g) for _, g in itertools.groupby([x, x, x * 2], key=lambda t: t.dim())],
    "groupby_tuple_keys": lambda x: (x + 1, [(k, len(list(g))) for k, g in
                                             itertools.groupby([(1, "a"), (1, "b"), (2, "c")], key=lambda p: (p[0],))]),
    "takewhile": lambda x: x * sum(itertools.takewhile(lambda v: v < 3, [1, 2, 5, 1])),
    "dropwhile": lambda x: x * sum(itertools.dropwhile(lambda v: v < 3, [1, 2, 5, 1])),
    "filterfalse": lambda x: x * sum(itertools.filterfalse(lambda v: v % 2 == 0, range(6))),
    "filterfalse_none": lambda x: (x + 1, list(itertools.filterfalse(None, [0, 1, "", "a", None]))),
    "compress": lambda x: x * sum(itertools.compress([1, 2, 3, 4], [1, 0, 1])),
    "compress_tensors": lambda x: list(itertools.compress([x, x + 1, x + 2], [True, False, True, True])),
    "tee": lambda x: (lambda a, b: (x * (sum(a) + next(b)), list(b)))(*itertools.tee([1, 2, 3])),
    "tee_three": lambda x: [list(t) for t in itertools.tee(iter([x, x * 2]), 3)],
    "tee_zero": lambda x: (x + 1, itertools.tee([1], 0)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_model_gives_the_iterator_result(name):
    fn = CASES[name]
    run_differential(fn, torch.randn(3))
    out = explain_captured(fn, torch.randn(3))
    assert out.graph_break_count == 0 and out.graph_count <= 1, out


LOG = []


def produce(x, n):
    for i in range(n):
        LOG.append(("produce", i))
        yield x + i


def test_generators_consumed_run_in_eager_order():
    """The models pull from a generator with side effects one item at a time, as the C iterators do."""
    def fn(x):
        LOG.clear()
        out = []
        for t in itertools.takewhile(lambda t: t.dim() == 1, produce(x, 3)):
            LOG.append("takewhile body")
            out.append(t)
        for t in itertools.compress(produce(x, 4), [1, 0, 1]):
            LOG.append("compress body")
            out.append(t)
        for k, g in itertools.groupby(produce(x, 3), key=lambda t: 0):
            LOG.append("group")
            out.extend(g)
        a, b = itertools.tee(produce(x, 2))
        out.append(next(a))
        LOG.append("tee a")
        out.append(next(b))
        out.extend(b)
        return out, list(LOG)

    run_differential(fn, torch.randn(3))
    assert_fully_captured(fn, torch.randn(3))


def test_inputs_are_made_iterators_when_the_iterator_is_made():
    """``cycle(x)`` calls ``iter(x)`` at once: a non-iterable raises there, before any ``next()``."""
    def fn(x):
        try:
            itertools.cycle(5)
        except TypeError as e:
            return x + 1, str(e)
        return x

    run_differential(fn, torch.randn(3))


@pytest.mark.parametrize("make", [lambda: itertools.count("a"), lambda: itertools.tee([1], -1)],
                         ids=["count_not_a_number", "tee_negative"])
def test_models_raise_as_the_iterator_does(make):
    def fn(x):
        try:
            make()
        except (TypeError, ValueError) as e:
            return x + 1, type(e).__name__, str(e)
        return x

    run_differential(fn, torch.randn(3))


def test_a_model_iterator_that_leaves_the_frame_breaks():
    """A model's generator never exists at run time: returning it is a break, the frame runs eagerly."""
    def fn(x):
        return x + 1, itertools.count(3)

    eager = fn(torch.ones(1))[1]
    with pytest.raises(dynacap.Unsupported):
        dynacap.optimize(fn, backend=CountingBackend(), fullgraph=True)(torch.ones(1))
    result = dynacap.optimize(fn, backend=CountingBackend())(torch.ones(1))[1]
    assert type(result) is type(eager) and next(result) == next(eager)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_backends(backend):
    def fn(x):
        return [a * b for a, b, _ in zip(itertools.cycle([x, x * 2]), itertools.count(1), range(3))]

    out = run_differential(fn, torch.randn(3), backend=CountingBackend(backend))
    assert out.compiles_first == 1
