"""Whole training steps under ``optimize``: losses, parameters, buffers and optimizer state equal eager's.

One step is forward, loss, ``backward()``, ``opt.step()``, ``opt.zero_grad()``
in one optimized function, run for three steps from the same initial state
as an eager twin.  The matrix: MLP, CNN with BatchNorm, Transformer encoder,
LSTM, GRU × SGD (momentum) and Adam, both ``foreach`` × backend, with and
without compiled autograd.  The default suite runs every model and optimizer
on ``eager`` (half of the cells with compiled autograd) and a slice on
``aot_eager`` and ``inductor``; the rest of the matrix is ``-m slow``.
"""
from __future__ import annotations

import copy
import warnings

import pytest
import torch
import torch.nn as nn

import dynacap
from dynacap import compiled_autograd


class ConvBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1)
        self.bn = nn.BatchNorm2d(6)
        self.fc = nn.Linear(6 * 4 * 4, 5)

    def forward(self, x):
        return self.fc(torch.relu(self.bn(self.conv(x))).flatten(1))


class Recurrent(nn.Module):
    def __init__(self, cell):
        super().__init__()
        self.rnn = cell(6, 10, batch_first=True)
        self.fc = nn.Linear(10, 5)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.fc(out[:, -1])


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(16, 2, dim_feedforward=24, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.fc = nn.Linear(16, 5)

    def forward(self, x):
        return self.fc(self.encoder(x).mean(1))


MODELS = {
    "mlp": (lambda: nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 5)), (4, 8)),
    "cnn_bn": (ConvBN, (4, 3, 4, 4)),
    "encoder": (Encoder, (4, 5, 16)),
    "lstm": (lambda: Recurrent(nn.LSTM), (4, 6, 6)),
    "gru": (lambda: Recurrent(nn.GRU), (4, 6, 6)),
}
OPTIMIZERS = {
    "sgd": lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.9, foreach=True),
    # eps well above rounding noise: a gradient that is zero in exact arithmetic (a bias before BatchNorm, the key
    # bias of attention) is noise of 1e-9 that Adam's m / sqrt(v) would turn into lr-sized steps of either sign, so
    # any kernel that rounds differently (inductor's fused ones) would move those parameters by 2 * lr.
    "adam": lambda params: torch.optim.Adam(params, lr=0.01, eps=1e-3, foreach=True),
}


def train_step(model, opt, x, y):
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss


def batches(shape, steps):
    for step in range(steps):
        g = torch.Generator().manual_seed(step)
        yield torch.randn(*shape, generator=g), torch.randint(0, 5, (shape[0],), generator=g)


def check_training(model_name, opt_name, backend, *, compiled_autograd_on=False, steps=3):
    make, shape = MODELS[model_name]
    torch.manual_seed(0)
    eager_model = make()
    model = copy.deepcopy(eager_model)
    eager_opt, opt = OPTIMIZERS[opt_name](eager_model.parameters()), OPTIMIZERS[opt_name](model.parameters())
    captured = dynacap.optimize(train_step, backend=backend)
    with warnings.catch_warnings(), dynacap.config.patch(compiled_autograd=compiled_autograd_on):
        warnings.simplefilter("ignore")  # torch's own notes (e.g. the encoder's nested-tensor advice)
        for step, (x, y) in enumerate(batches(shape, steps)):
            expected = train_step(eager_model, eager_opt, x, y)
            actual = captured(model, opt, x, y)
            torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5, msg=lambda m: f"step {step} loss: {m}")
            for (name, e), (_, c) in zip(eager_model.state_dict().items(), model.state_dict().items()):
                torch.testing.assert_close(c, e, rtol=1e-5, atol=1e-5, msg=lambda m: f"step {step} {name}: {m}")
            for p_e, p_c in zip(eager_model.parameters(), model.parameters()):
                assert p_c.grad is None and p_e.grad is None  # zero_grad(set_to_none=True) ran
                for key, value in eager_opt.state[p_e].items():
                    torch.testing.assert_close(opt.state[p_c][key], value, rtol=1e-5, atol=1e-5)


CELLS = [(m, o) for m in MODELS for o in OPTIMIZERS]
#: The slice of the matrix the default suite runs (the rest: ``-m slow``): every cell on the eager backend (with
#: or without compiled autograd), the compiling backends on a few.
DEFAULT = {
    ("eager", False): {("mlp", "sgd"), ("cnn_bn", "adam"), ("encoder", "sgd"), ("lstm", "adam"), ("gru", "sgd")},
    ("eager", True): {("mlp", "adam"), ("cnn_bn", "sgd"), ("encoder", "adam"), ("lstm", "sgd"), ("gru", "adam")},
    ("aot_eager", False): {("mlp", "adam"), ("cnn_bn", "sgd")},
    ("aot_eager", True): {("lstm", "adam"), ("gru", "sgd")},
    ("inductor", False): set(),
    ("inductor", True): {("mlp", "sgd")},
}


def _cells(compiled_autograd_on):
    return [pytest.param(m, o, backend, marks=() if (m, o) in DEFAULT[backend, compiled_autograd_on]
                         else pytest.mark.slow, id=f"{m}-{o}-{backend}")
            for backend in ("eager", "aot_eager", "inductor") for m, o in CELLS]


@pytest.fixture(autouse=True)
def fresh_caches():
    compiled_autograd.reset()
    yield
    compiled_autograd.reset()


@pytest.mark.parametrize("model_name, opt_name, backend", _cells(False))
def test_training_steps_match_eager(model_name, opt_name, backend):
    check_training(model_name, opt_name, backend)


@pytest.mark.parametrize("model_name, opt_name, backend", _cells(True))
def test_training_steps_with_compiled_autograd_match_eager(model_name, opt_name, backend):
    check_training(model_name, opt_name, backend, compiled_autograd_on=True)


@pytest.mark.parametrize("opt_name", ["sgd", "adam"])
def test_must_show_explain_of_a_training_step_has_at_most_two_breaks(opt_name):
    make, shape = MODELS["mlp"]
    model = make()
    opt = OPTIMIZERS[opt_name](model.parameters())
    steps = batches(shape, 2)
    x, y = next(steps)
    first = dynacap.explain(train_step)(model, opt, x, y)
    reasons = [str(r).splitlines()[0] for r in first.break_reasons]
    assert any(".backward()" in r for r in reasons), reasons
    assert first.graph_break_count <= 2, reasons
    # Once the optimizer has its state, the step is traced: one graph before the backward, one after it
    # holding the optimizer's update (its Python inlined: foreach kernels on parameters and state).
    x, y = next(steps)
    later = dynacap.explain(train_step)(model, opt, x, y)
    assert (later.graph_count, later.graph_break_count) == (2, 1), later
    update = later.graphs[1]
    targets = {getattr(n.target, "__name__", str(n.target)) for n in update.graph.nodes if n.op == "call_function"}
    assert any(t.startswith("_foreach_") for t in targets), targets


def test_first_step_creating_optimizer_state_runs_the_step_eagerly_with_its_reason():
    """Creating the state (a Python side effect) before updating parameters in place cannot be one graph:
    if the graph raised, the state eager made first would be lost."""
    make, shape = MODELS["mlp"]
    model = make()
    opt = OPTIMIZERS["adam"](model.parameters())
    x, y = next(batches(shape, 1))
    out = dynacap.explain(train_step)(model, opt, x, y)
    assert any("after a Python side effect" in str(r) for r in out.break_reasons), out.break_reasons
    assert len(opt.state) == len(list(model.parameters()))
