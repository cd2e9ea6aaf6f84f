"""Semantics regressions (issue 7) for resume functions: the rest of a frame after a break behaves as eager.

Keyword arguments of a call resumed at (item 4), closure cells first assigned after a break (item 6),
``locals()`` and other frame readers (item 8), zero-argument ``super()`` and the frame seen by
``sys._getframe()`` in a resumed frame (item 1), and the names messages give resumed frames.
"""
import contextlib
import io

import pytest
import torch

from differential import CountingBackend, run_differential

BACKENDS = [None, "aot_eager"]


def _backend(inner):
    return CountingBackend(inner)


# -- item 4: keyword arguments of a call resumed *at* ------------------------------------------------


def print_kw_in_while(x):
    buf = io.StringIO()
    i = 0
    y = x + 1
    while i < 2:
        print(3, end=";", file=buf)
        i += 1
    return y, buf.getvalue()


def print_kw_in_try(x):
    buf = io.StringIO()
    y = x * 2
    try:
        print(3, end=";", sep="-", file=buf)
    finally:
        pass
    return y + 1, buf.getvalue()


def method_kw_in_try(x):
    out = []
    y = x.sin()
    try:
        out.append(sorted([3, 1, 2], reverse=True))
        print("x", end="!", flush=False)
    except ValueError:
        pass
    return y, out


@pytest.mark.parametrize("inner", BACKENDS)
@pytest.mark.parametrize("fn", [print_kw_in_while, print_kw_in_try, method_kw_in_try])
def test_keyword_arguments_of_a_call_resumed_at(fn, inner):
    diff = run_differential(fn, torch.randn(3), backend=_backend(inner))
    assert diff.compiles_first >= 1


# -- item 6: closure cells first assigned after a break ----------------------------------------------


def cell_in_if(x, c):
    y = x + 1
    print("brk")
    if c:
        k = 2
    f = lambda: k  # noqa: E731
    return y * f()


def cell_in_for(x):
    y = x + 1
    print("brk")
    for i in range(2):
        k = i + 1
    f = lambda: k  # noqa: E731
    return y * f()


def cell_in_with(x):
    y = x + 1
    print("brk")
    with contextlib.nullcontext():
        k = 3
    f = lambda: k  # noqa: E731
    return y * f()


def cell_argument_read_after_break(x, k):
    y = x - 1
    print("brk")
    if k > 0:
        k = k + 1
    return y * (lambda: k)()


@pytest.mark.parametrize("inner", BACKENDS)
@pytest.mark.parametrize("fn,args", [
    (cell_in_if, (True,)),
    (cell_in_if, (False,)),  # eager raises NameError from the lambda: so must the captured run
    (cell_in_for, ()),
    (cell_in_with, ()),
    (cell_argument_read_after_break, (2,)),
], ids=["if-true", "if-false", "for", "with", "argument"])
def test_cell_first_assigned_after_break(fn, args, inner):
    run_differential(fn, torch.randn(3), *args, backend=_backend(inner))
