"""Loops over a list, dict or set see the container as it is at each step, as CPython's iterators do.

Before, the loop iterated a copy made when it started: items appended inside the loop were
never reached (a wrong result), and a dict growing inside ``for k in d`` raised nothing.
Breaks inside such loops leave the rest of the frame to eager code over the live container.
"""
from __future__ import annotations

import itertools

import pytest
import torch

import dynacap
from differential import assert_fully_captured, assert_same, run_differential


def append_while_iterating(x):
    queue = [1, 2]
    for v in queue:
        if v < 4:
            queue.append(v + 2)
        x = x + v
    return x, queue


def remove_while_iterating(x):
    items = [1, 2, 3, 4]
    for v in items:
        items.remove(v)
        x = x * 2 + v
    return x, items


def exhausted_stays_exhausted(x):
    items = [1]
    it = iter(items)
    first = next(it)
    rest = list(it)
    items.append(2)
    return x + first, rest, list(it)


def frame_list_grows(x, queue):
    for v in queue:
        if len(queue) < 5:
            queue.append(v)
        x = x + v
    return x


def dict_grows(x):
    d = {"a": 1}
    try:
        for k in d:
            d[k + "x"] = 2
    except RuntimeError as e:
        return x + 1, str(e)
    return x, "no error"


def dict_values_live(x):
    d = {"a": 1, "b": 2}
    out = []
    for k, v in d.items():
        d["b"] = 10  # same size: the items view reads the new value
        out.append(v)
    return x + sum(out), out


def set_grows(x):
    s = {1, 2}
    try:
        for v in s:
            s.add(v + 10)
    except RuntimeError as e:
        return x + 1, str(e)
    return x, "no error"


def dict_error_uncaught(x):
    d = {"a": 1}
    for k in d:
        d[k + "y"] = 2
    return x


def islice_reads_exactly(x):
    it = iter(range(10))
    head = list(itertools.islice(it, 3))
    skipped = list(itertools.islice(it, 5, 2))
    stepped = list(itertools.islice(iter(range(10)), 0, 5, 3))
    return x * next(it), head, skipped, stepped


ONE_GRAPH = [append_while_iterating, exhausted_stays_exhausted, dict_grows, dict_values_live, set_grows,
             islice_reads_exactly]


@pytest.mark.parametrize("fn", ONE_GRAPH, ids=lambda f: f.__name__)
def test_mutated_while_iterated(fn):
    run_differential(fn, torch.zeros(2))
    assert_fully_captured(fn, torch.zeros(2))


def test_removed_while_iterated():
    run_differential(remove_while_iterating, torch.zeros(2))


def test_frame_list_grows():
    run_differential(frame_list_grows, torch.zeros(2), [1, 2], fresh_inputs=lambda: ((torch.zeros(2), [1, 2]), {}))


def test_uncaught_runtime_error_raises_as_eager():
    run_differential(dict_error_uncaught, torch.zeros(2))


def test_break_inside_a_loop_over_a_list_that_grows_after_the_break(capsys):
    def f(x):
        queue = [1, 2]
        for v in queue:
            x = x + v
            print("at", v)  # a graph break
            if v < 3:
                queue.append(v + 2)
        return x, queue

    run_differential(f, torch.zeros(2))


def test_iterator_held_across_a_break():
    def f(x):
        items = [1, 2, 3]
        it = iter(items)
        first = next(it)
        print("break")
        items.append(4)
        return x + first, list(it)

    run_differential(f, torch.zeros(2))


def test_zip_and_enumerate_of_fixed_items_are_iterators_across_a_break():
    """``next()`` on a zip or enumerate over tuples, strings or ranges, then a break: the rest is an iterator
    (it was rebuilt as a tuple: TypeError at the next ``next()``)."""
    def f(x):
        z = zip((1, 2, 3), "abc")
        e = enumerate("abc", 1)
        first = next(z)
        next(e)
        print("break")
        return x * first[0], list(z), list(e), next(zip(range(3), (4, 5)))

    run_differential(f, torch.ones(2))


def test_zip_and_reversed_of_a_list_kept_across_a_break_run_eagerly():
    """Over a list, eager's zip/reversed would see the list change before the rest is read: one kept
    across a break is not rebuilt from the rows (it was a tuple: TypeError), the frame runs eagerly."""
    def f(x):
        l = [1, 2, 3]
        z = zip(l, "abc")
        r = reversed(l)
        l[0] = 100
        first = next(z)
        print("break")
        return x * first[0], list(z), next(r), list(r)

    run_differential(f, torch.ones(2))


def _comprehension_printing(x):
    ys = [x * i for i in range(4) if print(i) is None]
    return sum(ys)


def test_a_resumed_comprehension_unrolls_its_range_iterator():
    # After the break at print(), the comprehension resumes with the real range iterator as its argument.
    run_differential(_comprehension_printing, torch.ones(2))
    out = dynacap.explain(_comprehension_printing)(torch.ones(2))
    assert not any("range_iterator" in str(r.reason) for r in out.break_reasons), out.break_reasons


def _loop_then_next(it, x):
    total = x
    for i in it:
        total = total + i
        if i == 2:
            print("two")
            break
    return total, next(it, None)


def _next_then_generator(it, x):
    first = next(it)
    return x + first + sum(i for i in it if i < 3)


@pytest.mark.parametrize("fn", [_loop_then_next, _next_then_generator])
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_range_iterator_argument_is_advanced_as_in_eager(fn, backend):
    def outcome(f):
        it = iter(range(1, 6))
        result = f(it, torch.ones(2))
        return result, list(it)  # what is left of the caller's iterator

    expected = outcome(fn)
    compiled = dynacap.optimize(fn, backend=backend)
    for _ in range(2):
        result, left = outcome(compiled)
        assert left == expected[1]
        assert_same(expected[0], result)


def _dict_comprehension_breaking(x):
    return {i: x.sum().item() + i for i in range(3)}


def _set_comprehension_breaking(x):
    return {int(x.sum().item()) + i for i in range(3)}


def _nested_dict_comprehension_breaking(x):
    return {i: {j: print(i, j) for j in range(2)} for i in range(2)}


@pytest.mark.parametrize("fn", [_dict_comprehension_breaking, _set_comprehension_breaking,
                                _nested_dict_comprehension_breaking, _comprehension_printing])
def test_a_comprehension_resumed_after_a_break_builds_what_eager_builds(fn):
    # The resumed comprehension gets the dict or set it is building as an argument: what it adds there
    # (MAP_ADD, SET_ADD) is written back after each graph.
    run_differential(fn, torch.ones(2))
