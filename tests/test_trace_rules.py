"""Trace rules (``dynacap.trace_rules``): every public torch function has a rule, and each rule does what it says.

Differential: eager vs captured results and gradients, then graph and break counts and the reasons
written for users.
"""
from __future__ import annotations

import importlib
import inspect
import types
import typing
import warnings

import pytest
import torch
import torch.nn as nn
import torch.utils.checkpoint as checkpointing

import dynacap
from dynacap import trace_rules
from dynacap.trace_rules import Rule
from differential import assert_fully_captured, explain_captured, run_differential

#: torch's public namespaces whose Python functions the walk checks.
NAMESPACES = ["torch", "torch.nn.functional", "torch.nn.init", "torch.nn.utils", "torch.nn.utils.parametrize",
              "torch.nn.utils.rnn", "torch.optim", "torch.distributions", "torch.linalg", "torch.fft", "torch.special",
              "torch.autograd", "torch.autograd.functional", "torch.utils.checkpoint", "torch.func", "torch.random",
              "torch.cuda", "torch.jit", "torch.compiler", "torch.testing", "torch.masked", "torch.sparse",
              "torch.nested", "torch.amp", "torch.overrides", "torch.hub", "torch.serialization", "torch.fx",
              "torch.export", "torch.profiler", "torch.library", "torch.utils.data", "torch.ao.nn.quantized",
              "torch.distributed", "torch.backends", "torch.signal.windows"]


def _public_functions():
    for name in NAMESPACES:
        module = importlib.import_module(name)
        for attr in dir(module):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # deprecated aliases warn when read
                obj = getattr(module, attr, None)
            if attr.startswith("_") or not isinstance(obj, types.FunctionType):
                continue
            if not (trace_rules.module_of_file(obj.__code__.co_filename) or "").startswith("torch"):
                continue  # re-exported from the standard library (typing, contextlib...)
            yield f"{name}.{attr}", obj


def test_every_public_torch_function_has_a_rule_of_its_own():
    missing, seen = [], 0
    for public_name, fn in _public_functions():
        seen += 1
        rule = trace_rules.rule_for_code(fn.__code__)
        if rule is None or rule is trace_rules.DEFAULT:
            missing.append(f"{public_name} ({trace_rules.name_of_code(fn.__code__)})")
    assert seen > 300
    assert not missing, "no rule names these (they would fall to the default):\n" + "\n".join(missing)


def test_rules_are_found_by_the_longest_name():
    assert trace_rules.rule_for_code(inspect.unwrap(torch.optim.Adam.step).__code__).rule is Rule.INLINE
    # Its grad-mode wrapper is a model (without the requests to split another compiler's graph).
    assert trace_rules.rule_for_code(torch.optim.Adam.step.__code__).rule is Rule.MODEL
    # torch's private packages no rule names run eagerly; its other Python is traced.
    private = importlib.import_module("torch._weights_only_unpickler")
    assert trace_rules.rule_for_code(private.load.__code__) is trace_rules.PRIVATE
    assert trace_rules.rule_for_code(torch.nn.functional.relu.__code__).rule is Rule.GRAPH_OP
    # (torch._dynamo, once imported, wraps manual_seed in a marker the rules see through.)
    assert trace_rules.rule_for_code(inspect.unwrap(torch.manual_seed).__code__).rule is Rule.EAGER
    assert trace_rules.rule_for_code(torch.compiler.is_compiling.__code__).answer is True
    # torch's own __init__ has a rule that does not cover its submodules.
    assert trace_rules.rule_for_code(torch.is_tensor.__code__).name == "torch.__init__"
    assert trace_rules.rule_for_code(torch.utils.hooks.unserializable_hook.__code__) is trace_rules.DEFAULT
    # C functions: graph operations unless named.
    assert trace_rules.rule_for_object(torch.relu) is None
    assert trace_rules.rule_for_object(torch.is_grad_enabled).rule is Rule.FOLD
    # User code has no rule.
    assert trace_rules.rule_for_code(test_rules_are_found_by_the_longest_name.__code__) is None


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_non_reentrant_checkpoint_is_traced_with_eager_gradients(backend):
    def fn(x, w):
        h = checkpointing.checkpoint(lambda t: torch.tanh(t @ w) * 2, x, use_reentrant=False)
        return (h + 1).sum()

    x, w = torch.randn(4, 3), torch.randn(3, 3, requires_grad=True)
    assert_fully_captured(fn, x, w)
    w_eager, w_captured = w.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    fn(x, w_eager).backward()
    dynacap.optimize(fn, backend=backend)(x, w_captured).backward()
    torch.testing.assert_close(w_captured.grad, w_eager.grad)


def test_reentrant_checkpoint_runs_eagerly_with_a_reason():
    def fn(x, w):
        return checkpointing.checkpoint(lambda t: torch.tanh(t @ w), x, use_reentrant=True) + 1

    out = explain_captured(fn, torch.randn(4, 3), torch.randn(3, 3, requires_grad=True))
    assert out.graph_break_count == 1
    assert "reentrant checkpointing" in str(out.break_reasons[0])


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_non_reentrant_checkpoint_sequential_is_traced_with_eager_gradients(backend):
    torch.manual_seed(0)
    layers = torch.nn.Sequential(*[torch.nn.Linear(6, 6) for _ in range(5)])

    def fn(x):
        return checkpointing.checkpoint_sequential(layers, 2, x, use_reentrant=False, preserve_rng_state=False).sum()

    x = torch.randn(3, 6, requires_grad=True)
    assert_fully_captured(fn, x)
    x_eager, x_captured = x.detach().clone().requires_grad_(), x.detach().clone().requires_grad_()
    fn(x_eager).backward()
    eager_grads = [p.grad.clone() for p in layers.parameters()]
    layers.zero_grad()
    dynacap.optimize(fn, backend=backend)(x_captured).backward()
    torch.testing.assert_close(x_captured.grad, x_eager.grad)
    for got, expected in zip((p.grad for p in layers.parameters()), eager_grads):
        torch.testing.assert_close(got, expected)


def test_checkpoint_sequential_raises_where_torch_does():
    layers = [torch.nn.Tanh(), torch.nn.ReLU()]

    def segments_of_nothing(x):
        return checkpointing.checkpoint_sequential(layers, 3, x, use_reentrant=False)  # range() step 0

    def unknown_keyword(x):
        return checkpointing.checkpoint_sequential(layers, 1, x, use_reentrant=False, chunks=2)

    run_differential(segments_of_nothing, torch.randn(2, 3))
    run_differential(unknown_keyword, torch.randn(2, 3))


def test_reentrant_checkpoint_sequential_runs_eagerly_with_a_reason():
    layers = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Tanh())

    def by_keyword(x):
        return checkpointing.checkpoint_sequential(layers, 1, x, use_reentrant=True) + 1

    def by_position(x):
        return checkpointing.checkpoint_sequential(layers, 1, x, False) + 1  # not seen: eagerly too

    for fn in (by_keyword, by_position):
        out = explain_captured(fn, torch.randn(4, 3, requires_grad=True))
        assert out.graph_break_count == 1
        assert "reentrant checkpointing" in str(out.break_reasons[0])


def test_quantized_functional_module_is_inlined():
    from torch.ao.nn.quantized import FloatFunctional

    ff = FloatFunctional()

    def fn(x):
        return ff.add_scalar(ff.mul(x, x), 1.5) + ff.cat([x, x], dim=0).sum()

    assert_fully_captured(fn, torch.randn(3, 4))
    run_differential(fn, torch.randn(3, 4))


def test_record_function_block_is_traced_and_does_nothing():
    def fn(x):
        with torch.autograd.profiler.record_function("my range"):
            y = x.sin() * 2
        return y + 1

    assert_fully_captured(fn, torch.randn(5), min_ops=3)
    run_differential(fn, torch.randn(5))


def test_record_function_with_a_break_inside_runs_the_block_eagerly():
    @dynacap.disable
    def host(t):
        return t * 3

    def fn(x):
        with torch.autograd.profiler.record_function("my range"):
            y = host(x.sin())
        return y + 1

    run_differential(fn, torch.randn(5))


def test_compiler_questions_are_answered_as_a_compiler():
    def fn(x):
        if torch.compiler.is_compiling() and not torch.jit.is_scripting() and torch._utils.is_compiling():
            x = x + 1
        if torch.cuda.is_available():
            x = x * 100
        return x * 2

    x = torch.randn(3)
    out = dynacap.explain(fn)(x)
    assert (out.graph_count, out.graph_break_count) == (1, 0)
    # torch.compile's answers too: the compiler path, where eager takes the host path.
    torch.testing.assert_close(out.result, (x + 1) * 2)
    torch.testing.assert_close(fn(x), x * 2)


def test_calls_into_torchs_private_packages_break_cleanly():
    import torch._dynamo  # a test may name it; the engine only sees a private package of torch

    def fn(x):
        y = x.sin()
        torch._dynamo.graph_break()
        return y.cos()

    out = explain_captured(fn, torch.randn(3))
    assert out.graph_break_count == 1 and "internal machinery" in str(out.break_reasons[0])


def test_eager_rules_break_with_their_reason():
    def seeds(x):
        torch.manual_seed(3)
        return x + torch.rand(2)

    out = explain_captured(seeds, torch.randn(2))
    assert "global random state" in str(out.break_reasons[0])

    def autograd_grad(x):
        y = (x * x).sum()
        return torch.autograd.grad(y, x)[0]

    out = explain_captured(autograd_grad, torch.randn(3, requires_grad=True))
    assert "autograd engine" in str(out.break_reasons[0])


def test_torch_compiler_disable_is_a_break_disabled_by_the_user():
    @torch.compiler.disable
    def host(t):
        return t * 3

    def fn(x):
        return host(x + 1) - 1

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = explain_captured(fn, torch.randn(3))
    assert any("disabled by the user" in str(r) for r in out.break_reasons), out.break_reasons
    # The disabled function's own frame is never captured either: only the caller's two graphs.
    from differential import CountingBackend

    counting = CountingBackend()
    x = torch.randn(3)
    torch.testing.assert_close(dynacap.optimize(fn, backend=counting)(x), fn(x))
    assert len(counting.graphs) == 2
    targets = {getattr(n.target, "__name__", "") for g in counting.graphs for n in g.graph.nodes}
    assert "mul" not in targets, targets  # t * 3 is the disabled body


def test_dynacap_disable_names_the_user():
    @dynacap.disable
    def host(t):
        return t * 3

    def fn(x):
        return host(x + 1) - 1

    out = explain_captured(fn, torch.randn(3))
    assert "disabled by the user (dynacap.disable)" in str(out.break_reasons[0])


def test_typing_helpers_are_traced():
    import typing

    def fn(x, hint=typing.Optional[typing.List[int]]):
        origin = typing.get_origin(hint)
        args = typing.get_args(hint)
        return typing.cast(torch.Tensor, x) * len(args) + (1 if origin is typing.Union else 0)

    assert_fully_captured(fn, torch.randn(3))
    run_differential(fn, torch.randn(3))


def _grad_mode_after(fn, x):
    try:
        result = fn(x)
        return result, torch.is_grad_enabled()
    finally:
        torch.set_grad_enabled(True)


def _switch_and_restore(x):
    torch.set_grad_enabled(False)
    y = x * 2
    torch.set_grad_enabled(True)
    return y + x


def _switch_in_with(x):
    with torch.set_grad_enabled(False):
        y = x * 2
    return y * x


def _switch_and_return(x):
    torch.set_grad_enabled(False)
    return x * 2


@dynacap.disable
def _host(t):
    return t + 0


def _switch_around_a_break(x):
    torch.set_grad_enabled(False)
    y = _host(x * 2)
    torch.set_grad_enabled(True)
    return y * x


@pytest.mark.parametrize("fn, graphs", [(_switch_and_restore, 1), (_switch_in_with, 1), (_switch_and_return, 0),
                                        (_switch_around_a_break, 0)])
def test_set_grad_enabled_called_gives_eager_modes_and_results(fn, graphs):
    x = torch.randn(3, requires_grad=True)
    expected, mode = _grad_mode_after(fn, x)
    actual, captured_mode = _grad_mode_after(dynacap.optimize(fn), x)
    assert captured_mode == mode
    assert actual.requires_grad == expected.requires_grad
    torch.testing.assert_close(actual, expected)
    out = dynacap.explain(fn)(x)
    torch.set_grad_enabled(True)
    assert out.graph_count == graphs, out


@dynacap.allow_in_graph
def _opaque(x, scale):
    print("inside the opaque function")  # runs on fakes while capturing, and in the graph: never traced
    return torch.tanh(x) * scale


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_allow_in_graph_is_one_opaque_node(backend):
    from differential import CountingBackend

    def fn(x):
        return _opaque(x + 1, 2.0) - 1

    counting = CountingBackend(inner=backend)
    x = torch.randn(3, requires_grad=True)
    out = dynacap.optimize(fn, backend=counting)(x)
    torch.testing.assert_close(out, fn(x))
    (gm,) = counting.graphs
    assert _opaque in [n.target for n in gm.graph.nodes]
    out.sum().backward()  # gradients flow through the opaque node
    assert x.grad is not None


def test_distributions_are_traced():
    def normal(x):
        d = torch.distributions.Normal(x, torch.ones_like(x) * 2, validate_args=False)
        return d.log_prob(x * 2) + d.entropy() + d.mean * d.stddev

    def categorical(logits):
        c = torch.distributions.Categorical(logits=logits, validate_args=False)
        return c.log_prob(torch.tensor([0, 1, 2, 3])) + c.entropy() + c.probs.sum(-1)

    for fn, x in ((normal, torch.randn(4, 5)), (categorical, torch.randn(4, 5))):
        run_differential(fn, x)
        assert_fully_captured(fn, x)


def test_rsample_draws_as_eager():
    def fn(x):
        return torch.distributions.Normal(x, torch.ones_like(x), validate_args=False).rsample() * 2

    x = torch.randn(3)
    torch.manual_seed(1)
    expected = fn(x)
    torch.manual_seed(1)
    torch.testing.assert_close(dynacap.optimize(fn)(x), expected)


_HINT = typing.Optional[typing.List[int]]


def test_typing_constructs_are_constants_subscripted_for_real():
    def fn(x, hint=_HINT):
        a = torch.jit.annotate(typing.List[int], [])
        d = torch.jit.annotate(typing.Dict[str, torch.Tensor], {})
        d["k"] = x
        union = typing.get_origin(hint) is typing.Union  # an attribute of a constant compared by identity
        return typing.cast(torch.Tensor, d["k"]) * (len(a) + 1 + union + (hint.__origin__ is typing.Union))

    run_differential(fn, torch.randn(3))
    assert_fully_captured(fn, torch.randn(3))


def test_a_model_rule_names_its_function_only_not_the_code_nested_in_it():
    """The model of ``functools.singledispatch`` answered the calls of the generic function the real one returns
    (``singledispatch.<locals>.wrapper``): the model was called with the wrapper's arguments."""
    model = trace_rules.lookup("torch.utils.checkpoint.checkpoint")
    nested = trace_rules.lookup("torch.utils.checkpoint.checkpoint.<locals>.inner")
    assert model.rule is trace_rules.Rule.MODEL
    assert nested is not None and nested.rule is not trace_rules.Rule.MODEL


def test_frozen_standard_library_modules_are_named_by_their_filename():
    """``collections.abc``'s code lives in ``<frozen _collections_abc>``: without a module name no rule could
    name ``Mapping.keys``."""
    import collections.abc

    assert trace_rules.module_of_file("<frozen _collections_abc>") == "_collections_abc"
    assert trace_rules.name_of_code(collections.abc.Mapping.keys.__code__) == "_collections_abc.Mapping.keys"


def test_a_class_whose_code_attribute_is_a_descriptor_has_no_code_rule():
    """``types.FunctionType.__code__`` is a getset descriptor: asking a rule of it was an internal error."""
    trace_rules.rule_for_object(types.FunctionType)  # answered, never an AttributeError
    fn = dynacap.optimize(lambda x, c: (x + 1, c in (int, types.FunctionType)), fullgraph=True)
    assert fn(torch.ones(1), int)[1] is True
