"""Dicts beyond ``dict``: OrderedDict and defaultdict (made in the trace or from the frame), dicts keyed by
tensors read by key (``Optimizer.state``), ``tensor.grad`` read and assigned, and the small library models the
optimizers meet (``itertools.chain``, ``zip(strict=True)``, ``list[Tensor]``).  Differential against eager, then
graph counts.
"""
from __future__ import annotations

import collections
import itertools
import typing

import pytest
import torch

import dynacap
from differential import assert_fully_captured, explain_captured, run_differential


def test_defaultdict_made_in_the_trace_groups_tensors():
    def fn(xs):
        groups = collections.defaultdict(list)
        for i, x in enumerate(xs):
            groups[i % 2].append(x * 2)
        return {k: torch.stack(v).sum() for k, v in groups.items()}, type(groups).__name__

    xs = [torch.randn(3) for _ in range(4)]
    assert_fully_captured(fn, xs)
    run_differential(fn, xs)


def test_defaultdict_of_a_lambda_factory_and_a_returned_defaultdict():
    def fn(x):
        d = collections.defaultdict(lambda: 0)
        d["a"] += 1
        d["b"] = x + d["a"]
        return d

    out = dynacap.optimize(fn)(torch.ones(2))
    expected = fn(torch.ones(2))
    assert type(out) is collections.defaultdict and out["a"] == 1 and out["zzz"] == 0
    torch.testing.assert_close(out["b"], expected["b"])


def test_ordered_dict_made_and_from_the_frame():
    table = collections.OrderedDict([("b", 2.0), ("a", 3.0)])

    def fn(x, od):
        made = collections.OrderedDict()
        made["z"] = x
        made["y"] = x * 2
        od["c"] = x.sum()
        return list(made.keys()), list(od.keys()), sum(v for v in table.values()) * x, type(made)

    assert_fully_captured(fn, torch.randn(3), collections.OrderedDict(q=1))
    run_differential(fn, torch.randn(3), collections.OrderedDict(q=1))


def test_ordered_dict_mutated_in_place_keeps_its_order():
    def fn(x, od):
        od["new"] = x + 1
        del_free = od.pop("first")
        return del_free * x

    def fresh():
        return (torch.ones(3), collections.OrderedDict(first=torch.ones(3), second=2)), {}

    run_differential(fn, fresh_inputs=fresh)
    od = fresh()[0][1]
    dynacap.optimize(fn)(torch.randn(3), od)
    assert list(od) == ["second", "new"] and type(od) is collections.OrderedDict
    od.move_to_end("second")  # the OrderedDict's own order is intact
    assert list(od) == ["new", "second"]


class Keyed:
    """A stand-in for Optimizer.state: a defaultdict keyed by parameters."""

    def __init__(self, params):
        self.params = params
        self.state = collections.defaultdict(dict)


def _keyed_step(holder, x):
    for p in holder.params:
        state = holder.state[p]
        if len(state) == 0:
            state["count"] = torch.zeros(())
            state["avg"] = torch.zeros_like(p)
        state["count"] += 1
        state["avg"].mul_(0.5).add_(p * x.sum())
    return x * 2


def test_dict_keyed_by_tensors_created_then_read_by_key():
    params = [torch.randn(3), torch.randn(2)]
    eager, captured = Keyed(params), Keyed(params)
    fn = dynacap.optimize(_keyed_step)
    for step in range(3):
        x = torch.full((2,), float(step))
        torch.testing.assert_close(fn(captured, x), _keyed_step(eager, x))
        for p in params:
            assert set(captured.state[p]) == {"count", "avg"}
            for key in ("count", "avg"):
                torch.testing.assert_close(captured.state[p][key], eager.state[p][key])
    # Steady state: one graph, no break (the state read by key through each parameter's source).
    out = dynacap.explain(_keyed_step)(Keyed(params), torch.ones(2))
    assert out.graph_break_count == 0, out


def test_dict_keyed_by_tensors_len_or_iteration_breaks_cleanly():
    def fn(holder, x):
        return x * len(holder.state)

    holder = Keyed([torch.randn(2)])
    holder.state[holder.params[0]]["k"] = 1
    out = explain_captured(fn, holder, torch.ones(2))
    assert out.graph_break_count == 1 and "read by key" in str(out.break_reasons[0])


def test_grad_is_read_through_its_source_and_assigned_after_the_graph():
    def fn(w, x):
        y = x * w.grad if w.grad is not None else x
        w.grad = None
        return y, w.grad

    w = torch.randn(3, requires_grad=True)
    w.grad = torch.ones(3) * 2
    out = dynacap.explain(fn)(w, torch.randn(3))
    assert (out.graph_count, out.graph_break_count) == (1, 0), out
    assert w.grad is None
    for grad in (torch.ones(3) * 2, None):
        w_eager, w_captured = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
        w_eager.grad = w_captured.grad = grad
        x = torch.randn(3)
        expected, actual = fn(w_eager, x), dynacap.optimize(fn)(w_captured, x)
        torch.testing.assert_close(actual[0], expected[0])
        assert actual[1] is None and w_captured.grad is None


def test_grad_of_a_new_leaf_is_none_and_of_a_new_result_breaks():
    """``y = x * 2`` of an ``x`` needing no grad is a new leaf: nothing gives it a grad, ``.grad`` is None.
    Of an ``x`` that needs grad, ``y`` is a non-leaf, whose ``.grad`` eager warns about: a break."""
    def fn(x):
        y = x * 2
        return y, y.grad

    run_differential(fn, torch.randn(2))
    assert explain_captured(fn, torch.randn(2)).graph_break_count == 0
    out = explain_captured(fn, torch.randn(2, requires_grad=True))
    assert out.graph_break_count == 1 and "made in the captured code" in str(out.break_reasons[0])


def test_itertools_chain_and_strict_zip_and_generic_aliases():
    from typing import cast

    def fn(xs, ys):
        total = 0
        for t in itertools.chain(xs, ys, itertools.chain.from_iterable([xs])):
            total = total + t
        pairs = [a * b for a, b in zip(xs, ys, strict=True)]
        return cast(list[torch.Tensor], pairs), total

    xs, ys = [torch.randn(2), torch.randn(2)], [torch.randn(2), torch.randn(2)]
    assert_fully_captured(fn, xs, ys)
    run_differential(fn, xs, ys)


def test_zip_strict_of_different_lengths_raises_as_eager():
    def fn(xs):
        return [a for a, b in zip(xs, [1], strict=True)]

    run_differential(fn, [torch.ones(1), torch.ones(1)])


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_foreach_addcdiv_with_a_tensor_of_scalars(backend):
    def fn(ps, a, b, s):
        torch._foreach_addcdiv_(ps, a, b, s)
        torch._foreach_addcmul_(ps, a, b, s)
        torch._foreach_addcdiv_(ps, a, b, 0.5)
        return ps

    def inputs():
        g = torch.Generator().manual_seed(0)
        ps = [torch.randn(3, generator=g), torch.randn(2, 2, generator=g)]
        a = [torch.randn(3, generator=g), torch.randn(2, 2, generator=g)]
        b = [torch.rand(3, generator=g) + 1, torch.rand(2, 2, generator=g) + 1]
        return (ps, a, b, torch.tensor([0.1, -0.2])), {}

    expected = fn(*inputs()[0])
    actual = dynacap.optimize(fn, backend=backend)(*inputs()[0])
    for e, c in zip(expected, actual):
        torch.testing.assert_close(c, e)
    assert_fully_captured(fn, *inputs()[0])


def test_sequence_times_a_float_raises_as_eager():
    def fn(x):
        made = [x]
        return made * 1.5

    run_differential(fn, torch.randn(2))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_fromkeys_views_hash_and_vars(backend):
    from differential import CountingBackend

    class Box:
        def __init__(self, v):
            self.v = v

    def fn(x):
        d = dict.fromkeys(["a", "b"], 0)
        o = collections.OrderedDict.fromkeys("xy")
        b = Box(x)
        return (x + d["a"], d, o, type(o).__name__, "a" in d.keys(), 0 in d.values(), ("b", 0) in d.items(),
                hash("k") == hash("k"), hash((1, "a")), vars(b)["v"] * 2)

    run_differential(fn, torch.ones(2), backend=CountingBackend(inner=backend))
    assert_fully_captured(fn, torch.ones(2))


def test_list_sort_with_a_key():
    def fn(x):
        items = [3, 1, 2]
        items.sort(key=lambda v: -v)
        pairs = [("b", x), ("a", x * 2)]
        pairs.sort(key=lambda p: p[0], reverse=True)
        return x * items[0], items, pairs

    run_differential(fn, torch.ones(2))
    assert_fully_captured(fn, torch.ones(2))


TYPE_TABLE = {list: "list", dict: "dict", typing.Union: "union", int: 3}


def test_dict_keyed_by_classes_from_the_frame():
    # huggingface_hub's validators table: classes and typing constructs as keys.
    def fn(x, t):
        return x * TYPE_TABLE[int], TYPE_TABLE.get(t), TYPE_TABLE.get(typing.get_origin(typing.List[int]))

    run_differential(fn, torch.ones(2), dict)
    assert_fully_captured(fn, torch.ones(2), dict)


def test_a_break_inside_a_sort_key_is_not_taken_for_the_sorts_result():
    """A key that breaks (``.item()``) is called back by the sort, not by the traced CALL: the break
    must not resume inside it as if its value were the CALL's (``sorted`` returned the key's float;
    fuzz seeds 8000240, 8000278)."""
    def f(x, y):
        items = [x, y]
        items.sort(key=lambda e: e.abs().sum().item(), reverse=True)
        return items, sorted([x, y], key=lambda e: e.sum().item()), max([x, y], key=lambda e: e.sum().item())

    run_differential(f, torch.randn(3), torch.randn(3) * 5)


class _Palette(__import__("enum").Enum):
    RED = 1


#: A validator table keyed as huggingface_hub's is: typing special forms, builtin classes and ABCs.
VALIDATORS = {typing.Union: "union", typing.Literal: "literal", list: "list",
              collections.abc.Sequence: "sequence", _Palette: "enum"}


def test_a_global_dict_keyed_by_typing_forms_and_abcs_is_read_by_key():
    def fn(x, hint):
        scale = len(VALIDATORS.get(typing.get_origin(hint), "none"))
        return x * scale + len(VALIDATORS[collections.abc.Sequence])

    assert_fully_captured(fn, torch.ones(2), typing.Literal["a"])
    run_differential(fn, torch.ones(2), typing.Literal["a"])
    compiled = dynacap.optimize(fn, backend="eager")
    assert torch.equal(compiled(torch.ones(2), typing.Literal["a"]), fn(torch.ones(2), typing.Literal["a"]))
    VALIDATORS[typing.Literal] = "a literal"  # the keys are unchanged: the value is guarded through its key
    try:
        assert torch.equal(compiled(torch.ones(2), typing.Literal["a"]), fn(torch.ones(2), typing.Literal["a"]))
        VALIDATORS[tuple] = "tuple"  # a new key: the dict's keys are guarded
        assert torch.equal(compiled(torch.ones(2), typing.Literal["a"]), fn(torch.ones(2), typing.Literal["a"]))
    finally:
        VALIDATORS[typing.Literal] = "literal"
        VALIDATORS.pop(tuple, None)
