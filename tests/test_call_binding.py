"""Inlined calls bind their arguments by a plan per call shape (``call_frames._plan_of``): it must give what
``inspect.Signature.bind`` + ``apply_defaults`` give, for every kind of parameter, and refuse what bind refuses."""
import inspect
import itertools

import pytest
import torch

from dynacap.interpreter.call_frames import _apply_plan, _plan_of
from tests.differential import CountingBackend, run_differential


def _f1(a, b=2, *args, c, d=4, **kw): pass
def _f2(a, /, b, *, c=3): pass
def _f3(*args, **kwargs): pass
def _f4(a, b, /, c=1, *rest): pass
def _f5(self, x, y=None, *, z=(), **extra): pass
def _f6(): pass
def _f7(a, /, **kw): pass


@pytest.mark.parametrize("fn", [_f1, _f2, _f3, _f4, _f5, _f6, _f7])
def test_plan_binds_as_signature_bind(fn):
    signature = inspect.signature(fn)
    names = ["a", "b", "c", "d", "x", "y", "z", "self", "q", "kw", "args"]
    shapes = [(n, kws) for n in range(5) for r in range(4) for kws in itertools.permutations(names, r)]
    for count, kwnames in shapes:
        args = [object() for _ in range(count)]
        kwargs = {k: object() for k in kwnames}
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            with pytest.raises(TypeError):
                _plan_of(signature, (count, kwnames))
            continue
        bound.apply_defaults()
        planned = _apply_plan(_plan_of(signature, (count, kwnames)), args, kwargs)
        assert list(planned) == list(bound.arguments), (count, kwnames)
        for name, value in bound.arguments.items():
            got = planned[name]
            if isinstance(value, dict):
                assert list(got.items()) == list(value.items())
            elif isinstance(value, tuple):
                assert got == value and all(a is b for a, b in zip(got, value))
            else:
                assert got is value, (count, kwnames, name)


def _callee(a, b=10, *rest, scale=1.0, **options):
    return (a + b) * scale, len(rest), list(options)


def _caller(x):
    first = _callee(x, 1, scale=2.0, z=1, y=2)
    again = _callee(x, 2, scale=3.0, z=3, y=4)  # the same shape: the memoised plan
    other = _callee(x, 1, 2, 3, y=5, z=6)  # keywords in another order: another plan
    return first, again, other, _callee(x)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_calls_of_one_shape_bind_alike(backend):
    counter = CountingBackend(backend)
    run_differential(_caller, torch.randn(3), backend=counter)
    assert counter.compiles == 1


def _wrong_call(x):
    try:
        return _callee(x, scale=1.0, a=2)  # a twice: TypeError
    except TypeError as e:
        return str(e)


def test_a_call_bind_refuses_still_breaks():
    run_differential(_wrong_call, torch.randn(2))
