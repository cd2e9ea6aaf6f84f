"""Inlined calls bind their arguments by a plan per call shape (``call_frames._plan_of``): it must give what
``inspect.Signature.bind`` + ``apply_defaults`` give, for every kind of parameter, and refuse what bind refuses."""
import inspect
import itertools

import pytest
import torch

from dynacap.errors import GraphBreak
from dynacap.interpreter.call_frames import bind_arguments
from dynacap.values.constant import ConstantValue
from dynacap.values.containers import DictValue, TupleValue
from tests.differential import CountingBackend, run_differential


def _f1(a, b=2, *args, c, d=4, **kw): pass
def _f2(a, /, b, *, c=3): pass
def _f3(*args, **kwargs): pass
def _f4(a, b, /, c=1, *rest): pass
def _f5(self, x, y=None, *, z=(), **extra): pass
def _f6(): pass
def _f7(a, /, **kw): pass


class _Function:
    """What ``bind_arguments`` reads of a function's value: the function, no source (defaults as constants)."""

    source = None

    def __init__(self, fn):
        self.fn = fn


@pytest.mark.parametrize("fn", [_f1, _f2, _f3, _f4, _f5, _f6, _f7])
def test_plan_binds_as_signature_bind(fn):
    signature = inspect.signature(fn)
    names = ["a", "b", "c", "d", "x", "y", "z", "self", "q", "kw", "args"]
    shapes = [(n, kws) for n in range(5) for r in range(4) for kws in itertools.permutations(names, r)]
    for count, kwnames in shapes * 2:  # the second time from the memoised plans
        args = [ConstantValue(object()) for _ in range(count)]
        kwargs = {k: ConstantValue(object()) for k in kwnames}
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as e:
            with pytest.raises(GraphBreak, match=f"{fn.__qualname__}: {e} "):
                bind_arguments(None, _Function(fn), args, kwargs)
            continue
        bound.apply_defaults()
        local_values = bind_arguments(None, _Function(fn), args, kwargs)
        assert list(local_values) == list(bound.arguments), (count, kwnames)
        for name, value in bound.arguments.items():
            got = local_values[name]
            kind = signature.parameters[name].kind
            if kind is inspect.Parameter.VAR_KEYWORD:
                assert isinstance(got, DictValue) and list(got.items.items()) == list(value.items())
            elif kind is inspect.Parameter.VAR_POSITIONAL:
                assert isinstance(got, TupleValue) and len(got.items) == len(value)
                assert all(a is b for a, b in zip(got.items, value))
            elif isinstance(value, ConstantValue):
                assert got is value, (count, kwnames, name)
            else:
                assert isinstance(got, ConstantValue) and got.value is value  # a default


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
