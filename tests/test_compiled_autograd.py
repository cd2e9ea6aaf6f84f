"""Compiled autograd (``dynacap.compiled_autograd``): whole-backward graphs, differential against the eager engine.

Every test runs the same steps twice, on the eager engine and inside
``compiled_autograd.enable``, from the same initial parameters, and
compares gradients, the order in which hooks fired, and raised errors; then
counts captures (one per backward structure) and what the backend received.
"""
from __future__ import annotations

import contextlib
import logging
import warnings

import pytest
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

import dynacap
from dynacap import compiled_autograd
from differential import CountingBackend, assert_same


@pytest.fixture(autouse=True)
def fresh_cache():
    compiled_autograd.reset()
    yield
    compiled_autograd.reset()


def batch(step, *shape):
    return torch.randn(*shape or (5, 8), generator=torch.Generator().manual_seed(step))


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def hooked_mlp(log):
    """An MLP with a tensor hook (doubling a gradient), a post-accumulate hook and a module full backward hook."""
    model = mlp()
    model[0].weight.register_hook(lambda g: log.append("weight0 tensor hook") or g * 2)
    model[2].bias.register_post_accumulate_grad_hook(
        lambda p: log.append(f"bias2 post-accumulate {p.grad.sum().item():.5f}"))
    model[2].register_full_backward_hook(
        lambda mod, gin, gout: log.append(f"layer2 full backward {gout[0].sum().item():.5f}"))
    return model


def train(make_model, steps=3, backend=None, shapes=None, zero_grad=True):
    """Run ``steps`` backward steps; returns (hook log, gradients per step, compiled-autograd stats or None)."""
    log: list[str] = []
    model = make_model(log)
    grads = []
    block = compiled_autograd.enable(backend) if backend is not None else contextlib.nullcontext()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the full backward hook's note on inputs without grad (eager says it too)
        with block as stats:
            for step in range(steps):
                x = batch(step, *(shapes[step] if shapes else ()))
                model(x).pow(2).sum().backward()
                grads.append([p.grad.clone() for p in model.parameters()])
                if zero_grad:
                    model.zero_grad()
    return log, grads, stats


def assert_same_training(expected, actual):
    (log_e, grads_e, _), (log_c, grads_c, _) = expected, actual
    assert log_c == log_e
    for step, (ge, gc) in enumerate(zip(grads_e, grads_c)):
        for i, (a, b) in enumerate(zip(ge, gc)):
            torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5, msg=lambda m: f"step {step} grad {i}: {m}")


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_must_show_mlp_three_steps_with_hooks_one_backward_graph(backend):
    counting = CountingBackend(backend)
    eager = train(hooked_mlp)
    compiled = train(hooked_mlp, backend=counting)
    assert_same_training(eager, compiled)
    assert len(eager[0]) == 9  # three hooks on each of three steps
    stats = compiled[2]
    assert stats.captures == 1 and stats.fallbacks == []
    targets = [str(n.target) for gm in counting.graphs for n in gm.graph.nodes if n.op == "call_function"]
    assert targets.count("aten.mm.default") == 3  # the backward matmuls (grad of weight 2, input 2, weight 1)
    assert counting.runs == 3 * len(counting.graphs)  # compiled once, run on every step


def test_inductor_backward():
    eager = train(hooked_mlp)
    compiled = train(hooked_mlp, backend="inductor")
    assert_same_training(eager, compiled)
    assert compiled[2].captures == 1


def test_same_structure_reuses_and_a_new_shape_recompiles():
    shapes = [(5, 8), (5, 8), (7, 8)]
    eager = train(hooked_mlp, shapes=shapes)
    compiled = train(hooked_mlp, backend="eager", shapes=shapes)
    assert_same_training(eager, compiled)
    assert compiled[2].captures == 2


def test_accumulating_into_existing_grads():
    eager = train(hooked_mlp, zero_grad=False)
    compiled = train(hooked_mlp, backend="aot_eager", zero_grad=False)
    assert_same_training(eager, compiled)
    assert compiled[2].captures == 2  # .grad None on the first step, a tensor afterwards


def test_a_replaced_hook_is_the_one_called():
    def run(block):
        model, out = mlp(), []
        with block:
            for factor in (2.0, 3.0, 5.0):
                handle = model[0].weight.register_hook(lambda g, f=factor: g * f)
                model(batch(0)).sum().backward()
                out.append(model[0].weight.grad.clone())
                handle.remove()
                model.zero_grad()
        return out

    with compiled_autograd.enable("eager") as stats:
        pass
    for e, c in zip(run(contextlib.nullcontext()), run(compiled_autograd.enable("eager"))):
        assert_same(e, c)
    assert stats.fallbacks == []


def test_autograd_grad_returns_eager_gradients():
    model = mlp()
    x = batch(0).requires_grad_()
    expected = torch.autograd.grad(model(x).tanh().sum(), [x, model[0].weight])
    with compiled_autograd.enable("aot_eager") as stats:
        actual = torch.autograd.grad(model(x).tanh().sum(), [x, model[0].weight])
    assert_same(expected, actual)
    assert stats.captures == 1 and model[0].weight.grad is None


def test_saved_tensor_hooks_and_non_reentrant_checkpoint_are_captured_exactly():
    def run(block):
        model, log = mlp(), []
        with block:
            with torch.autograd.graph.saved_tensors_hooks(lambda t: log.append("pack") or t.clone(),
                                                          lambda t: log.append("unpack") or t):
                loss = model(batch(0)).tanh().sum()
            loss.backward()
            checkpoint(lambda a: model(a).tanh(), batch(1), use_reentrant=False).sum().backward()
        return log, [p.grad for p in model.parameters()]

    expected = run(contextlib.nullcontext())
    with compiled_autograd.enable("eager") as stats:
        actual = run(contextlib.nullcontext())
    assert_same(expected, actual)
    assert stats.captures == 2 and stats.fallbacks == []


def reentrant_checkpoint(model):
    x = batch(0).requires_grad_()
    checkpoint(lambda a: model(a).tanh(), x, use_reentrant=True).sum().backward()


def create_graph(model):
    (g,) = torch.autograd.grad(model(batch(0)).pow(3).sum(), model[0].weight, create_graph=True)
    g.sum().backward()


def anomaly_detection(model):
    with torch.autograd.detect_anomaly():
        model(batch(0)).sum().backward()


@pytest.mark.parametrize("program, reason", [
    (reentrant_checkpoint, "reentrant activation checkpointing"),
    (create_graph, "create_graph=True"),
    (anomaly_detection, "anomaly detection"),
])
def test_unsupported_backwards_run_on_the_eager_engine_with_a_logged_reason(program, reason, caplog):
    expected_model, model = mlp(), mlp()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # anomaly mode's own warning
        program(expected_model)
        with caplog.at_level(logging.INFO, logger="dynacap.compiled_autograd"):
            with compiled_autograd.enable("eager") as stats:
                program(model)
    for e, c in zip(expected_model.parameters(), model.parameters()):
        assert type(c.grad) is torch.Tensor  # never a fake left behind by an abandoned capture
        assert_same(e.grad, c.grad)
    assert any(reason in r for r in stats.fallbacks), stats.fallbacks
    assert any(reason in r.getMessage() for r in caplog.records)
    assert type(torch.ones(1) + 1) is torch.Tensor  # no fake or proxy mode left on


def test_in_place_change_of_a_saved_tensor_raises_as_eager():
    def run():
        a = nn.Linear(4, 4)(batch(0, 3, 4))
        b = a.tanh()
        out = b.exp()
        b.add_(1)
        with pytest.raises(RuntimeError) as info:
            out.sum().backward()
        return str(info.value).splitlines()[0]

    expected = run()
    with compiled_autograd.enable("eager"):
        assert run() == expected


@pytest.mark.parametrize("forward_backend", ["aot_eager"])
def test_backward_of_an_optimized_forward(forward_backend):
    torch.manual_seed(0)
    w1, w2 = torch.randn(8, 16, requires_grad=True), torch.randn(16, 4, requires_grad=True)

    def loss(x):
        return (torch.relu(x @ w1) @ w2).pow(2).sum()

    captured = dynacap.optimize(loss, backend=forward_backend)
    expected = []
    for step in range(2):
        loss(batch(step)).backward()
        expected.append((w1.grad.clone(), w2.grad.clone()))
        w1.grad = w2.grad = None
    with compiled_autograd.enable("eager") as stats:
        for step in range(2):
            captured(batch(step)).backward()
            assert_same(expected[step], (w1.grad, w2.grad))
            w1.grad = w2.grad = None
    assert stats.captures == 1


def test_config_compiled_autograd_uses_the_optimize_backend():
    model = mlp()
    eager_model = mlp()

    def step(m, x):
        loss = m(x).pow(2).sum()
        loss.backward()
        return loss

    counting = CountingBackend()
    captured = dynacap.optimize(step, backend=counting)
    with dynacap.config.patch(compiled_autograd=True):
        for i in range(2):
            assert_same(step(eager_model, batch(i)), captured(model, batch(i)))
            for e, c in zip(eager_model.parameters(), model.parameters()):
                assert_same(e.grad, c.grad)
            eager_model.zero_grad()
            model.zero_grad()
    backward_graphs = [gm for gm in counting.graphs
                       if any(str(n.target) == "aten.mm.default" for n in gm.graph.nodes)]
    assert backward_graphs, "the backward's ATen graph went to the optimize call's backend"
    assert not hasattr(torch.autograd.backward, "_dynacap_original")  # entry points restored after the call


class Branches(nn.Module):
    """Two branches from one tensor and a residual: the engine's ready queue decides the order of hooks."""

    def __init__(self, log):
        super().__init__()
        self.log = log
        self.a, self.b, self.c, self.d = (nn.Linear(8, 8) for _ in range(4))

    def forward(self, x):
        h = self.a(x)
        h.register_hook(lambda g: self.log.append("tensor h"))
        u, v = self.b(h).relu(), self.c(h).tanh()
        u.register_hook(lambda g: self.log.append("tensor u"))
        v.register_hook(lambda g: self.log.append("tensor v"))
        return self.d(u + v) + h


def hooked_branches(log):
    torch.manual_seed(0)
    model = Branches(log)
    for name, layer in model.named_children():
        layer.register_full_backward_pre_hook(lambda m, gout, n=name: log.append(f"pre {n}"))
        layer.register_full_backward_hook(lambda m, gin, gout, n=name: log.append(f"full {n}"))
    for name, p in model.named_parameters():
        p.register_post_accumulate_grad_hook(lambda p, n=name: log.append(f"accumulated {n}"))
    return model


def test_hooks_of_a_branching_model_fire_in_eager_order():
    eager = train(hooked_branches, steps=2, shapes=[(3, 8)] * 2)
    compiled = train(hooked_branches, steps=2, shapes=[(3, 8)] * 2, backend="eager")
    assert_same_training(eager, compiled)
    assert len(eager[0]) == 2 * (3 + 8 + 8) and compiled[2].captures == 1


INTEROP = """
import warnings, torch, torch._dynamo.compiled_autograd as torch_ca
from dynacap import compiled_autograd
warnings.simplefilter("ignore")
lin, x = torch.nn.Linear(4, 4), torch.randn(3, 4)
with torch_ca._enable(lambda gm: gm):   # torch's own compiled autograd meets these node types first
    lin(x).sum().backward()
expected = lin.weight.grad.clone()
lin.zero_grad()
compiled_autograd.reset()  # the engine's program cache is shared: forget torch's programs
with compiled_autograd.enable("eager") as stats:
    lin(x).sum().backward()
assert type(lin.weight.grad) is torch.Tensor and torch.equal(lin.weight.grad, expected)
assert stats.captures == 0 and "another compiled autograd" in stats.fallbacks[0], stats.fallbacks
print("ok")
"""


def test_node_types_bound_by_torch_compiled_autograd_run_eagerly():
    """The engine binds each node type's formula once per process, to the first compiler that meets it."""
    import os
    import pathlib
    import subprocess
    import sys

    root = pathlib.Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-c", INTEROP], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]


class ScaleWithStash(torch.autograd.Function):
    """A Python Function whose backward reads a saved tensor, a constant and a tensor stashed on ctx."""

    @staticmethod
    def forward(ctx, x, k):
        ctx.k, ctx.stash = k, x * 2
        ctx.save_for_backward(x)
        return x * k

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * ctx.k + ctx.stash * 0.5 + x, None


def test_python_function_retain_grad_inputs_and_allow_unused():
    def run():
        torch.manual_seed(0)
        w, b = torch.randn(4, 4, requires_grad=True), torch.randn(4, requires_grad=True)
        x, unused = torch.randn(3, 4), torch.randn(2, requires_grad=True)
        out = []
        for k in (2.0, 3.0):  # the stashed constant changes: read from the real ctx on every backward
            h = x @ w
            h.retain_grad()
            y = ScaleWithStash.apply(h, k) + b
            loss = y.pow(2).sum()
            loss.backward(inputs=[w, h], retain_graph=True)
            out += [w.grad.clone(), h.grad.clone(), b.grad]
            loss.backward(retain_graph=True)
            out += [w.grad.clone(), b.grad.clone()]
            out += list(torch.autograd.grad(y.sum(), [w, b, unused], allow_unused=True))
            w.grad = b.grad = None
        return out

    expected = run()
    with compiled_autograd.enable("aot_eager") as stats:
        actual = run()
    assert_same(expected, actual)
    assert stats.fallbacks == [] and stats.captures == 3


def test_a_cached_program_compiles_for_the_backend_of_the_block_it_runs_in():
    first, second = CountingBackend(), CountingBackend()
    eager = train(hooked_mlp, steps=2)
    assert_same_training(eager, train(hooked_mlp, steps=2, backend=first))
    compiled = train(hooked_mlp, steps=2, backend=second)
    assert_same_training(eager, compiled)
    assert compiled[2].captures == 0  # the engine's cache answered (same structure)...
    assert len(second.graphs) == len(first.graphs) > 0 and second.runs == 2 * len(second.graphs)  # ...its backend


class FirstOnly(torch.autograd.Function):
    """A backward that gives no gradient (``None``) for its second input, which requires one."""

    @staticmethod
    def forward(ctx, a, b):
        return a * 2 + b

    @staticmethod
    def backward(ctx, g):
        return g * 2, None


@pytest.mark.parametrize("other_path", [True, False], ids=["summed-with-another-path", "only-path"])
def test_a_python_backward_returning_none_for_an_input_that_requires_grad(other_path):
    def run():
        torch.manual_seed(0)
        w1, w2 = torch.randn(4, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True)
        x = torch.randn(3, 4)
        h2 = x @ w2
        loss = FirstOnly.apply(x @ w1, h2).sum()
        if other_path:
            loss = loss + h2.tanh().sum()
        loss.backward()
        return w1.grad, w2.grad

    expected = run()
    with compiled_autograd.enable("aot_eager") as stats:
        actual = run()
    assert_same(expected, actual)
    assert stats.fallbacks == []
