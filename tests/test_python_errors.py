"""Errors Python raises on values the trace knows (builtins on constants, missing keys, indices out of range,
exhausted iterators) are exceptions the frame's own handlers catch, in one graph, as eager does.

A raise the frame does not catch is a graph break (eager raises it).  A dict subclass with ``__missing__``
never raises KeyError for a missing key.
"""
from __future__ import annotations

import pytest
import torch

from differential import assert_fully_captured, run_differential


def int_of_bad_text(x):
    try:
        n = int("zz")
    except ValueError as e:
        n = len(str(e))
    return x + n


def missing_key(x):
    d = {"a": 1}
    try:
        v = d["b"]
    except KeyError:
        v = -1
    return x + v


def index_out_of_range(x):
    items = [1, 2]
    try:
        v = items[5]
    except IndexError:
        v = 10
    return x * v


def exhausted_iterator(x):
    it = iter([x])
    first = next(it)
    try:
        second = next(it)
    except StopIteration:
        second = first * 2
    return first + second


def frame_list_index(x, items):
    try:
        return x + items[3]
    except IndexError:
        return x - 1


class Defaulting(dict):
    def __missing__(self, key):
        return 5


def missing_with_default(x):
    d = Defaulting(a=1)
    try:
        v = d["b"]
    except KeyError:
        v = -1
    return x + v


@pytest.mark.parametrize("fn", [int_of_bad_text, missing_key, index_out_of_range, exhausted_iterator],
                         ids=lambda f: f.__name__)
def test_handled_in_one_graph(fn):
    run_differential(fn, torch.randn(3))
    assert_fully_captured(fn, torch.randn(3))


def test_frame_list_shorter_then_longer():
    """The handler's path depends on the list's length: it is guarded."""
    run_differential(frame_list_index, torch.zeros(2), [1, 2])
    run_differential(frame_list_index, torch.zeros(2), [1, 2, 3, 4], reset=False)


def test_missing_calls_the_subclass_hook():
    run_differential(missing_with_default, torch.zeros(2))


def test_uncaught_error_raises_as_eager():
    def f(x):
        return x + int("zz")

    run_differential(f, torch.zeros(2))


def test_exception_text_in_strings():
    def f(x):
        try:
            raise ValueError("bad", 3)
        except ValueError as e:
            text = f"{e}|{e!r}|" + str(e)
        return x + len(text)

    run_differential(f, torch.zeros(2))
    assert_fully_captured(f, torch.zeros(2))


def test_str_of_a_tensor_still_breaks():
    def f(x):
        return x + len(str(x))

    run_differential(f, torch.zeros(2))
