"""Semantics regressions (issue 7) for values: deleted locals, functions made while capturing,
constants in guards, objects created during the trace, recurrent layers.

Each test runs the program eagerly and captured and compares results, exceptions and compile counts.
"""
import math

import pytest
import torch

import dynacap
from differential import CountingBackend, assert_same, run_differential

BACKENDS = ["eager", "aot_eager"]


def calls(fn, arg_sets, inner=None):
    """Call ``fn`` captured on each argument tuple, comparing each result (and its types) with eager."""
    dynacap.reset()
    backend = CountingBackend(inner)
    captured = dynacap.optimize(fn, backend=backend)
    for args in arg_sets:
        expected, actual = fn(*args), captured(*args)
        assert_same(expected, actual, f"result for {args!r}")
        assert repr(expected[1:]) == repr(actual[1:]), f"{args!r}: {actual[1:]!r} != eager {expected[1:]!r}"
    return backend


# -- item 7: `del` of an argument or local --------------------------------------------------------------
def _del_arg(x):
    y = x * 2
    del x
    return y + x


def _del_then_read_inner(x):
    y = x + 1
    del x
    return x + y


def _del_in_callee(x):
    return _del_then_read_inner(x) * 2


def _del_then_reassign(x):
    y = x + 1
    del x
    x = y * 3
    return x


def _del_in_loop(x):
    for i in range(3):
        if i == 2:
            del x
        y = x + i
    return y


def _del_local_in_loop(x):
    out = []
    for i in range(3):
        t = x * i
        out.append(t)
        del t
    return out


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_del_arg, _del_in_callee, _del_in_loop, _del_then_reassign, _del_local_in_loop],
                         ids=lambda f: f.__name__)
def test_del_makes_later_reads_unbound(fn, backend):
    diff = run_differential(fn, torch.ones(3), backend=CountingBackend(backend))
    if fn in (_del_arg, _del_in_callee, _del_in_loop):
        assert isinstance(diff.eager.exception, UnboundLocalError)


def test_del_of_an_argument_at_the_start():
    def g(x):
        del x
        return x + 1

    diff = run_differential(g, torch.ones(2))
    assert isinstance(diff.captured[1].exception, UnboundLocalError)


# -- item 10: constants are guarded by type and bits ----------------------------------------------------
def _divide(x, a):
    return x / a, a


@pytest.mark.parametrize("backend", BACKENDS)
def test_negative_zero_does_not_reuse_the_zero_entry(backend):
    x = torch.ones(2)
    b = calls(_divide, [(x, 0.0), (x, -0.0), (x, 0.0), (x, -0.0)], backend)
    assert b.compiles == 2


def test_nan_argument_hits_the_cache():
    x = torch.ones(2)
    b = calls(_divide, [(x, math.nan)] * 5)
    assert b.compiles == 1


def test_bool_int_float_constants_have_separate_entries():
    x = torch.ones(2)
    b = calls(_divide, [(x, 1), (x, True), (x, 1.0)] * 2)
    assert b.compiles == 3


def test_complex_with_signed_zero():
    def f(x, c):
        return x * c.real, math.copysign(1.0, c.imag)

    x = torch.ones(2)
    b = calls(f, [(x, complex(1, 0.0)), (x, complex(1, -0.0)), (x, complex(1, -0.0))])
    assert b.compiles == 2


def test_signed_zero_and_bool_inside_containers():
    def f(x, t):
        return x / t[0], t

    x = torch.ones(2)
    b = calls(f, [(x, (0.0,)), (x, (-0.0,)), (x, (1,)), (x, (True,)), (x, (-0.0,))])
    assert b.compiles == 4

    def g(x, s):
        return x + len(s), math.copysign(1.0, next(iter(s)))

    assert calls(g, [(x, frozenset({0.0})), (x, frozenset({-0.0}))]).compiles == 2


def test_dict_keys_are_guarded_by_type():
    def f(x, d):
        return x + 1, list(d)[0]

    x = torch.ones(2)
    assert calls(f, [(x, {1: 2}), (x, {True: 2}), (x, {1.0: 2}), (x, {True: 2})]).compiles == 3


def test_float_guard_description_is_readable():
    out = dynacap.explain(_divide)(torch.ones(2), -0.0)
    assert "L['a'] == -0.0" in str(out)
