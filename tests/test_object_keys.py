"""User objects as dict keys and set members: hashed by their class's ``__hash__`` and compared by its
``__eq__``, traced when the real dict or set of the trace asks (``protocols.TracedKey``).

The dict or set of the trace is a real one holding stand-in keys, so CPython itself decides when a key
is hashed, which stored key a probe is compared with (stored key on the left), that the same object
matches without a call, which of two equal keys survives and the iteration order.  Found by the
construct suite (dunder_eq_hash_dict_key, dunder_hash_set, dataclass_frozen_hash: "used where a
Python constant is needed").
"""
from __future__ import annotations

import dataclasses

import pytest
import torch

import dynacap
from differential import CountingBackend, assert_fully_captured, run_differential

CALLS = []


class Tag:
    def __init__(self, name):
        self.name = name

    def __eq__(self, other):
        return isinstance(other, Tag) and self.name == other.name

    def __hash__(self):
        return hash(self.name)


class Logged(Tag):
    """Records each hash and comparison: eager's count and order must be the captured code's."""

    def __eq__(self, other):
        CALLS.append(f"eq {self.name} {getattr(other, 'name', other)}")
        return super().__eq__(other)

    def __hash__(self):
        CALLS.append(f"hash {self.name}")
        return len(self.name)  # "a" and "b" collide: lookups compare


@dataclasses.dataclass(frozen=True)
class Frozen:
    a: int
    b: int = 1


class Unhashable(Tag):
    __hash__ = None


class ByTensor(Tag):
    def __init__(self, name, t):
        super().__init__(name)
        self.t = t

    def __hash__(self):
        return int(self.t.sum())


@pytest.fixture(autouse=True)
def _clear_calls():
    CALLS.clear()
    yield
    CALLS.clear()


def test_dict_keyed_by_objects_made_in_the_trace():
    def f(x):
        d = {Tag("a"): x, Tag("b"): x * 2, Frozen(1): x * 3}
        d[Tag("a")] = d[Tag("a")] + 1  # an equal key replaces the value, the first key stays
        return d[Tag("b")] + d[Frozen(1)] + d[Tag("a")], len(d), Tag("b") in d, Tag("z") in d, d.get(Frozen(2))

    assert_fully_captured(f, torch.randn(4))
    run_differential(f, torch.randn(4))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_set_of_objects_collapses_equal_members(backend):
    def f(x):
        s = {Tag("a"), Tag("a"), Tag("b"), Frozen(2), Frozen(2)}
        s.discard(Tag("b"))
        s.add(Frozen(3))
        return x * len(s), Tag("a") in s, Tag("b") in s, Frozen(3) in s, sorted(t.name for t in s if type(t) is Tag)

    diff = run_differential(f, torch.randn(4), backend=CountingBackend(backend))
    assert diff.compiles_first == 1
    assert_fully_captured(f, torch.randn(4))


def test_hash_and_eq_run_as_often_and_in_eagers_order():
    def f(x):
        CALLS.clear()
        d = {Logged("a"): x}
        d[Logged("b")] = x * 2  # same hash as "a": compared with it first
        y = d[Logged("b")] + d.pop(Logged("a"))
        s = {Logged("a"), Logged("b"), Logged("a")}
        s.discard(Logged("b"))
        return y * len(s), list(CALLS)

    assert_fully_captured(f, torch.randn(4))
    run_differential(f, torch.randn(4))


def test_calls_are_seen_after_the_call():
    def f(x):
        s = {Logged("a"), Logged("b")}
        return x + len(s)

    expected = (f(torch.ones(1)), list(CALLS))
    CALLS.clear()
    out = dynacap.optimize(f, backend="eager", fullgraph=True)(torch.ones(1))
    assert torch.equal(out, expected[0]) and CALLS == expected[1]


def test_dict_keyed_by_objects_escapes_with_its_keys():
    def f(x):
        k = Tag("k")
        d = {k: x + 1, Tag("j"): x}
        return d, k

    def check(out):
        d, k = out
        assert list(d)[0] is k and [t.name for t in d] == ["k", "j"]

    check(dynacap.optimize(f, backend="eager", fullgraph=True)(torch.ones(2)))
    check(f(torch.ones(2)))


def test_frame_objects_as_keys():
    def f(x, a, b):
        d = {a: x}
        return d[b] * 2, b in {a}

    run_differential(f, torch.randn(3), Tag("a"), Tag("a"))
    assert_fully_captured(f, torch.randn(3), Tag("a"), Tag("a"))


def test_missing_and_unhashable_keys_raise_as_in_eager():
    def f(x):
        d = {Tag("a"): x}
        try:
            d[Tag("b")]
        except KeyError:
            x = x + 1
        try:
            {Unhashable("u")}
        except TypeError as e:
            return x, str(e)
        return x, ""

    assert_fully_captured(f, torch.randn(3))
    run_differential(f, torch.randn(3))


def test_hash_read_from_a_tensor_still_breaks():
    def f(x):
        return x + len({ByTensor("a", x)})

    with pytest.raises(dynacap.Unsupported):
        dynacap.optimize(f, backend="eager", fullgraph=True)(torch.ones(2))
    run_differential(f, torch.ones(2))


def test_double_star_of_non_string_keys_raises_as_in_eager():
    # A wrong result before: the keys were turned into strings ({'1': 2}).
    def g(**kw):
        return kw

    def f(x):
        try:
            return x + 1, g(**{1: 2})
        except TypeError as e:
            return x, str(e)

    run_differential(f, torch.ones(2))


class Registry(dict):
    pass


def test_dict_subclass_of_object_keys_breaks_cleanly():
    # A dict subclass tracks constant keys only: its keys never leak as the trace's stand-ins.
    def f(x):
        r = Registry({Tag("a"): 1})
        return x + len(r), [type(k).__name__ for k in r]

    with pytest.raises(dynacap.Unsupported):
        dynacap.optimize(f, backend="eager", fullgraph=True)(torch.ones(2))
    run_differential(f, torch.ones(2))


def test_mapping_pattern_on_a_dict_keyed_by_objects():
    def f(x):
        CALLS.clear()
        d = {Logged("a"): x, "k": x * 2}
        match d:
            case {"k": v}:
                return v + 1, len(CALLS)
        return x, len(CALLS)

    assert_fully_captured(f, torch.ones(2))
    run_differential(f, torch.ones(2))


def test_dicts_keyed_by_objects_compare_and_copy_as_in_eager():
    def f(x):
        CALLS.clear()
        d = {Logged("a"): 1, Logged("b"): 2}  # equal hashes: "b" is compared with "a" once
        del d[Logged("a")]
        d[Logged("c")] = 3
        e = d.copy()
        same = d == {Logged("b"): 2, Logged("c"): 3}
        return x + len(e), same, d != e, list(CALLS)

    assert_fully_captured(f, torch.randn(2))
    run_differential(f, torch.randn(2))


def test_dicts_keyed_by_objects_with_tensor_values_still_break_on_eq():
    def f(x):
        return x + 1, {Tag("a"): x} == {Tag("a"): x + 0}

    with pytest.raises(dynacap.Unsupported):
        dynacap.optimize(f, backend="eager", fullgraph=True)(torch.ones(1))
    run_differential(f, torch.ones(1))


@pytest.mark.parametrize("program", ["impure_hash", "key_changed", "set_impure"])
def test_rebuilding_would_hash_again_breaks_cleanly(program):
    # Made again after the graph, the dict or set hashes its keys again: eager hashed them once, before
    # the change.
    def impure_hash(x):
        return x + 1, {Logged("a"): 1}

    def key_changed(x):
        k = Tag("a")
        d = {k: 1}
        k.name = "b"
        return x + 1, d

    def set_impure(x):
        return x + 1, {Logged("a")}

    f = {"impure_hash": impure_hash, "key_changed": key_changed, "set_impure": set_impure}[program]
    with pytest.raises(dynacap.Unsupported, match="hash the object again"):
        dynacap.optimize(f, backend="eager", fullgraph=True)(torch.ones(1))
    CALLS.clear()
    eager = f(torch.ones(1))
    eager_calls = list(CALLS)
    CALLS.clear()
    captured = dynacap.optimize(f, backend="eager")(torch.ones(1))
    assert CALLS == eager_calls and len(captured[1]) == len(eager[1])
    if program == "key_changed":
        (k,) = captured[1]
        assert k.name == "b" and Tag("b") not in captured[1]  # eager's table: hashed as "a"
