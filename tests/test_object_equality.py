"""``==`` and ``!=`` on user objects follow CPython's rich-comparison protocol, never plain identity.

The class's own ``__eq__``/``__ne__`` is inlined (left operand first, the
right one's first when its class is a subclass overriding it, then identity);
``object.__ne__`` inverts the class's ``__eq__``.  Found by the construct
suite: two objects made in the trace compared by identity (``E(1) == E(1)``
gave False where eager gives True).
"""
from __future__ import annotations

import dataclasses

import pytest
import torch

import dynacap
from differential import assert_fully_captured, run_differential


class Point:
    def __init__(self, a):
        self.a = a

    def __eq__(self, other):
        return isinstance(other, Point) and self.a == other.a


class NeverEqual(Point):
    def __eq__(self, other):
        return False


class Plain:
    def __init__(self, a):
        self.a = a


class OnlyNe:
    def __init__(self, a):
        self.a = a

    def __ne__(self, other):
        return "different"


@dataclasses.dataclass
class Record:
    a: int


@dataclasses.dataclass(frozen=True)
class Frozen:
    a: int


PROGRAMS = {
    "own_eq": lambda x: x + (Point(1) == Point(1)),
    "own_eq_differs": lambda x: x + (Point(1) == Point(2)) + (Point(1) != Point(2)),
    "ne_inverts_own_eq": lambda x: x + (Point(1) != Point(1)),
    "plain_is_identity": lambda x: x + (Plain(1) == Plain(1)) + (Plain(1) != Plain(1)),
    "plain_same_object": lambda x: (lambda p: x + (p == p) + (p != p))(Plain(1)),
    "dataclass_eq": lambda x: x + (Record(1) == Record(1)) + (Record(1) != Record(2)),
    "frozen_dataclass_eq": lambda x: x + (Frozen(1) == Frozen(1)),
    "subclass_reflected_first": lambda x: x + (Point(1) == NeverEqual(1)),
    "against_scalars": lambda x: x + (Point(1) == 3) + (3 == Plain(2)) + (Plain(1) != None),  # noqa: E711
    "only_ne_defined": lambda x: x + len(OnlyNe(1) != OnlyNe(1)) + (OnlyNe(1) == OnlyNe(1)),
    "eq_returning_a_tensor": lambda x: x * (Record(x.sum().item() > 0) == Record(True)),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_equality_of_objects_made_in_the_trace(name):
    fn = PROGRAMS[name]
    run_differential(fn, torch.randn(3))
    if name != "eq_returning_a_tensor":
        assert_fully_captured(fn, torch.randn(3))


def test_equality_of_frame_objects_with_their_own_eq():
    def f(x, a, b):
        return x + (a == b) + (a != b)

    run_differential(f, torch.zeros(2), Point(1), Point(1))
    run_differential(f, torch.zeros(2), Point(1), Point(2))
    p = Point(3)
    run_differential(f, torch.zeros(2), p, p)


def test_equality_of_containers_compares_contents():
    """An OrderedDict or defaultdict equal to a dict, a dict's keys/items views equal to sets: contents,
    never identity (all were False under capture; found by the construct suite)."""
    import collections

    def f(x):
        d = {"a": 1, "b": 2}
        a = collections.OrderedDict([("a", 1), ("b", 2)])
        dd = collections.defaultdict(int, {"a": 1})
        return x + torch.tensor([d.keys() == {"a", "b"}, d.items() == {("a", 1), ("b", 2)}, a == {"b": 2, "a": 1},
                                 dd == {"a": 1}, a == collections.OrderedDict([("b", 2), ("a", 1)]),
                                 d.values() == d.values(), d.keys() == ["a", "b"], {1, 2} == [1, 2]])

    run_differential(f, torch.zeros(8))
    assert_fully_captured(f, torch.zeros(8))


def test_is_between_a_module_sentinel_and_an_object_the_trace_holds_is_guarded_and_decided():
    # dataclasses.replace on a dataclass made in the trace: `f._field_type is _FIELD_CLASSVAR` compares a
    # field the trace made with a sentinel of the dataclasses module (guarded by type only).
    def fn(x):
        @dataclasses.dataclass
        class P:
            t: torch.Tensor
            n: int = 1

        q = dataclasses.replace(P(x, 2), n=3)
        return q.t * q.n + len(dataclasses.fields(q))

    assert_fully_captured(fn, torch.ones(2))
    run_differential(fn, torch.ones(2))


class Registry(dict):
    pass


class Logged:
    calls = []

    def __init__(self, a):
        self.a = a

    def __eq__(self, other):
        Logged.calls.append((self.a, getattr(other, "a", other)))
        return isinstance(other, Logged) and self.a == other.a


def test_dicts_compare_with_dict_subclasses_by_dict_eq():
    import collections

    def f(x):
        c = collections.Counter(a=1)
        return x + 1, c == {"a": 1}, {"a": 1} == c, c != {"a": 2}, Registry(a=1) == {"a": 1}, \
            {"a": 1, "b": 2} == Registry(b=2, a=1), Registry(a=1) == {"a": 1, "b": 2}, {"a": 1} == Point(1)

    assert_fully_captured(f, torch.randn(2))
    run_differential(f, torch.randn(2))


def test_dict_eq_compares_values_in_eagers_order():
    def f(x):
        Logged.calls.clear()
        same = Registry(p=Logged(1), q=Logged(2)) == {"q": Logged(2), "p": Logged(1)}
        return x * 2, same, list(Logged.calls)

    assert_fully_captured(f, torch.randn(2))
    run_differential(f, torch.randn(2))


def test_dict_eq_over_tensor_values_still_breaks():
    # The truth of a tensor comparison is known only at run time.
    def f(x):
        return x + 1, Registry(a=x) == {"a": x + 0}

    with pytest.raises(dynacap.Unsupported):
        dynacap.optimize(f, backend="eager", fullgraph=True)(torch.ones(1))
    run_differential(f, torch.ones(1))
