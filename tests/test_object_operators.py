"""Python's operators on user objects: their classes' methods by CPython's protocol, inlined.

``a + b`` tries ``type(a).__add__`` then ``type(b).__radd__`` (first when ``type(b)`` is a
subclass of ``type(a)`` that overrides it); ``+=`` tries ``__iadd__`` first; ``<`` falls back to
the right operand's ``__gt__``; ``-a`` is ``__neg__``.  Methods are looked up on the type (an
instance attribute named ``__add__`` changes nothing), and patching the class recompiles.
"""
from __future__ import annotations

import pytest
import torch

from differential import assert_fully_captured, run_differential


class Vec:
    def __init__(self, v):
        self.v = v

    def __add__(self, other):
        if isinstance(other, Vec):
            return Vec(self.v + other.v)
        if isinstance(other, (int, float)):
            return Vec(self.v + other)
        return NotImplemented

    def __radd__(self, other):
        return Vec(other + self.v)

    def __sub__(self, other):
        return Vec(self.v - other.v)

    def __mul__(self, k):
        return Vec(self.v * k)

    def __neg__(self):
        return Vec(-self.v)

    def __matmul__(self, other):
        return (self.v * other.v).sum()

    def __lt__(self, other):
        return self.v.sum() < other.v.sum()


class Right(Vec):
    def __radd__(self, other):
        return Vec(self.v * 100)


class Acc:
    def __init__(self, t):
        self.t = t
        self.n = 0

    def __iadd__(self, other):
        self.t = self.t + other
        self.n += 1
        return self


class Shadowed(Vec):
    def __init__(self, v):
        super().__init__(v)
        self.__add__ = lambda other: "instance attribute"  # never used by `+`


def add(x):
    return (Vec(x) + Vec(x * 2)).v


def reflected_number(x):
    return (1.5 + Vec(x)).v


def reflected_tensor(x):
    return (x + Vec(x)).v


def not_implemented_then_reflected(x):
    return (Vec(x) + Right(x)).v


def in_place(x):
    a = Acc(x)
    a += x
    a += 2
    return a.t, a.n


def arithmetic_chain(x):
    return (-(Vec(x) - Vec(x * 3)) * 2).v


def matmul(x):
    return Vec(x) @ Vec(x + 1)


def ordering_and_reflection(x):
    return x + (Vec(x) < Vec(x + 1)) + (Vec(x + 1) > Vec(x))


def sum_of_objects(x):
    return sum([Vec(x), Vec(x * 2)], Vec(x * 0)).v


def looked_up_on_the_type(x):
    return (Shadowed(x) + Vec(x)).v


ONE_GRAPH = [add, reflected_number, reflected_tensor, not_implemented_then_reflected, in_place, arithmetic_chain,
             matmul, ordering_and_reflection, sum_of_objects, looked_up_on_the_type]


@pytest.mark.parametrize("fn", ONE_GRAPH, ids=lambda f: f.__name__)
def test_operators_on_objects(fn):
    run_differential(fn, torch.randn(3))
    assert_fully_captured(fn, torch.randn(3))


def test_frame_objects():
    def f(a, b):
        return (a + b).v, (a - b).v

    run_differential(f, Vec(torch.ones(2)), Vec(torch.ones(2) * 3))


def test_no_method_raises_as_eager():
    def f(x):
        return Vec(x) - 1  # __sub__ reads other.v: AttributeError, as eager

    run_differential(f, torch.ones(2))

    def g(x):
        return (object() + x)

    run_differential(g, torch.ones(2))


def test_patching_the_class_recompiles():
    def f(x):
        return (Vec(x) * 2).v

    run_differential(f, torch.ones(2))
    original = Vec.__mul__
    try:
        Vec.__mul__ = lambda self, k: Vec(self.v * k * 10)
        run_differential(f, torch.ones(2), reset=False)
    finally:
        Vec.__mul__ = original


def test_torch_function_classes_are_left_to_eager():
    class Wrapped:
        def __init__(self, t):
            self.t = t

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return "handled"

        def __radd__(self, other):
            return "radd"

    def f(x):
        return x + Wrapped(x)

    run_differential(f, torch.ones(2))
