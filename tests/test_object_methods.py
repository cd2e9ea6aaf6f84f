"""Bound methods of user objects: their attributes as CPython's ``method_getattro`` answers them.

``m.__self__`` is the object, ``m.__func__`` the class's function, ``__doc__`` and anything the
method type itself lacks (``__name__``, ``__qualname__``, a function attribute) is read from the
function.  Found by the construct suite (bound_method_identity_and_self: ``.__self__`` broke).
"""
from __future__ import annotations

import pytest
import torch

import dynacap
from differential import assert_fully_captured, run_differential


class Meters:
    """Meters of something."""

    def __init__(self, v):
        self.v = v

    def scale(self, t):
        """Scale t."""
        return t * self.v


Meters.scale.unit = 10  # a function attribute, read through the bound method


def test_self_and_func_of_a_method_made_in_the_trace():
    def f(x):
        m = Meters(3)
        g = m.scale
        return g.__self__.v * x, g.__func__ is Meters.scale, g.__self__ is m, g.__func__(m, x)

    assert_fully_captured(f, torch.randn(4))
    run_differential(f, torch.randn(4))


def test_method_forwards_names_and_function_attributes():
    def f(x):
        g = Meters(2).scale
        return x * g.unit, g.__name__, g.__qualname__, g.__doc__, g.__module__

    assert_fully_captured(f, torch.randn(4))
    run_differential(f, torch.randn(4))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_write_through_self_of_a_frame_object_is_visible_after_the_call(backend):
    def f(x, m):
        m.scale.__self__.v = 7
        return m.scale(x)

    m = Meters(1)
    out = dynacap.optimize(f, backend=backend, fullgraph=True)(torch.ones(2), m)
    assert m.v == 7 and torch.equal(out, torch.full((2,), 7.0))
    run_differential(f, torch.ones(2), fresh_inputs=lambda: ((torch.ones(2), Meters(1)), {}))


def test_repr_of_a_method_still_breaks():
    # Its text holds the object's address, not known at capture time.
    def f(x):
        return x + 1, repr(Meters(3).scale).startswith("<bound method")

    with pytest.raises(dynacap.Unsupported):
        dynacap.optimize(f, backend="eager", fullgraph=True)(torch.randn(2))
    run_differential(f, torch.randn(2))
