"""pack_padded_sequence -> nn.LSTM on a PackedSequence -> pad_packed_sequence, captured once the lengths are known.

The lengths (a small CPU integer tensor, or a list) are guarded on their values, so the packed shapes are
static and the chain is one graph with eager's result; new lengths recompile; what eager would refuse, or
lengths the graph may have written, still break.
"""
from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pack_sequence, pad_packed_sequence

import dynacap
from differential import CountingBackend, assert_same, explain_captured, run_differential


def make(cls=nn.LSTM, **options):
    torch.manual_seed(0)
    return cls(4, 6, **options)


def chain(lstm, batch_first=True, enforce_sorted=True, total_length=None, with_hx=False):
    def program(x, lengths):
        packed = pack_padded_sequence(x, lengths, batch_first=batch_first, enforce_sorted=enforce_sorted)
        if with_hx:
            batch = len(lengths)
            layers = lstm.num_layers * (2 if lstm.bidirectional else 1)
            hx = (torch.ones(layers, batch, 6) * 0.5, torch.full((layers, batch, 6), -0.25))
            out, (h, c) = lstm(packed, hx)
        else:
            out, (h, c) = lstm(packed)
        padded, out_lengths = pad_packed_sequence(out, batch_first=batch_first, total_length=total_length)
        return padded, out_lengths, h, c, out.batch_sizes
    return program


def inputs(lengths, batch_first=True, steps=5):
    torch.manual_seed(1)
    batch = len(lengths)
    x = torch.randn(batch, steps, 4) if batch_first else torch.randn(steps, batch, 4)
    return x, torch.tensor(lengths)


def captured_once(program, *args, backend="eager"):
    counting = CountingBackend(backend)
    diff = run_differential(program, *args, backend=counting)
    assert diff.graph_count == 1, f"{diff.graph_count} graphs"
    out = explain_captured(program, *args)
    assert (out.graph_count, out.graph_break_count) == (1, 0), out
    return diff


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_one_graph(batch_first, enforce_sorted):
    lengths = [5, 3, 2] if enforce_sorted else [2, 5, 3]
    captured_once(chain(make(batch_first=batch_first), batch_first, enforce_sorted), *inputs(lengths, batch_first))


@pytest.mark.parametrize("options", [dict(bidirectional=True), dict(num_layers=2), dict(bias=False),
                                     dict(num_layers=2, bidirectional=True)], ids=str)
def test_layer_options(options):
    lstm = make(batch_first=True, **options)
    captured_once(chain(lstm, enforce_sorted=False, with_hx=True), *inputs([3, 5, 1, 3]))


def test_equal_lengths_and_total_length():
    captured_once(chain(make(), batch_first=False, total_length=7), *inputs([4, 4, 2], batch_first=False))


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU])
def test_gradients_match_eager(cls):
    def step(model, x, lengths):
        out, h = model(pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False))
        padded, _ = pad_packed_sequence(out, batch_first=True)
        loss = padded.pow(2).sum() + (h[0] if isinstance(h, tuple) else h).sum()
        loss.backward()
        return loss, [p.grad for p in model.parameters()]

    x, lengths = inputs([2, 5, 4])
    eager = make(cls, batch_first=True, bidirectional=True)
    expected = step(eager, x.clone().requires_grad_(), lengths)
    model = make(cls, batch_first=True, bidirectional=True)
    backend = CountingBackend("aot_eager")
    actual = dynacap.optimize(step, backend=backend)(model, x.clone().requires_grad_(), lengths)
    assert_same(expected, actual)
    assert backend.compiles == 1  # the graph before backward(); after it the grads are only read


def test_new_lengths_recompile_once():
    """Other values fail the value guard; values that keep changing are then not read (the packing runs
    eagerly), so a new value does not compile again."""
    program = chain(make(batch_first=True), enforce_sorted=False)
    backend = CountingBackend()
    compiled = dynacap.optimize(program, backend=backend)
    compiles = []
    for lengths in ([5, 3, 2], [5, 3, 2], [1, 4, 4], [2, 2, 5], [3, 3, 3], [5, 1, 1], [5, 3, 2]):
        x, t = inputs(lengths)
        assert_same(program(x, t), compiled(x, t))
        compiles.append(backend.compiles)
    assert compiles[:3] == [1, 1, 2]
    assert compiles[3:] == [compiles[3]] * 4
    x, t = inputs([5, 3, 2])
    t[1] = 1  # the same tensor object, other values
    assert_same(program(x, t), compiled(x, t))


def test_new_lengths_recompile_with_static_shapes():
    program = chain(make(batch_first=True), enforce_sorted=False)
    backend = CountingBackend()
    compiled = dynacap.optimize(program, backend=backend, dynamic=False)
    for lengths, compiles in (([5, 3, 2], 1), ([1, 4, 4], 2), ([5, 3, 2], 2), ([2, 2, 2], 3)):
        x, t = inputs(lengths)
        assert_same(program(x, t), compiled(x, t))
        assert backend.compiles == compiles, lengths


def test_lengths_as_a_list_and_pack_sequence():
    lstm = make()

    def program(a, b, c):
        packed = pack_sequence([a, b, c], enforce_sorted=False)
        out, _ = lstm(packed)
        return pad_packed_sequence(out)

    torch.manual_seed(2)
    captured_once(program, torch.randn(3, 4), torch.randn(5, 4), torch.randn(1, 4))


def test_under_no_grad_and_inductor():
    lstm = make(batch_first=True)

    def program(x, lengths):
        with torch.no_grad():
            return chain(lstm)(x, lengths)

    captured_once(program, *inputs([5, 3, 2]), backend="inductor")


def test_lengths_written_in_the_graph_break():
    lstm = make(batch_first=True)

    def program(x, lengths):
        lengths = lengths.clone()
        lengths[0] = 4
        out, _ = lstm(pack_padded_sequence(x, lengths, batch_first=True))
        return pad_packed_sequence(out, batch_first=True)

    run_differential(program, *inputs([5, 3, 2]))
    out = explain_captured(program, *inputs([5, 3, 2]))
    assert "depends on tensor data" in out.break_reasons[0].reason


def test_input_written_before_packing_breaks():
    lstm = make(batch_first=True)

    def program(x, lengths):
        lengths.sub_(1)
        return chain(lstm)(x, lengths)

    out = explain_captured(program, *inputs([5, 3, 2]))
    assert out.graph_break_count >= 1


def test_unsorted_lengths_raise_as_eager():
    program = chain(make(batch_first=True), enforce_sorted=True)
    x, lengths = inputs([2, 5, 3])
    with pytest.raises(RuntimeError, match="must be sorted in decreasing order"):
        program(x, lengths)
    with pytest.raises(RuntimeError, match="must be sorted in decreasing order"):
        dynacap.optimize(program, backend="eager")(x, lengths)
    out = explain_captured(chain(make(batch_first=True), enforce_sorted=False), x, lengths)
    assert (out.graph_count, out.graph_break_count) == (1, 0)


def test_large_lengths_still_break():
    lstm = make(batch_first=True)
    torch.manual_seed(3)
    lengths = torch.arange(70, 0, -1)
    x = torch.randn(70, 70, 4)
    out = explain_captured(chain(lstm), x, lengths)
    assert out.graph_break_count >= 1


@pytest.mark.parametrize("layer", [
    lambda: make(nn.GRU, batch_first=True),
    lambda: make(nn.GRU, num_layers=2, bidirectional=True, batch_first=True).double(),
    lambda: make(nn.RNN, batch_first=True),
    lambda: make(nn.RNN, nonlinearity="relu", bidirectional=True, batch_first=True)],
    ids=["gru", "gru2-bi-f64", "rnn-tanh", "rnn-relu-bi"])
@pytest.mark.parametrize("lengths", [[5, 3, 2], [4, 4, 4]], ids=str)
def test_gru_and_rnn_bit_for_bit(layer, lengths):
    rnn = layer()
    dtype = next(rnn.parameters()).dtype

    def program(x, lengths, h0):
        out, h = rnn(pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False), h0)
        return pad_packed_sequence(out, batch_first=True), h

    x, t = inputs(lengths)
    h0 = torch.randn(rnn.num_layers * (2 if rnn.bidirectional else 1), len(lengths), 6, dtype=dtype)
    t = t[[2, 0, 1]]
    expected = program(x.to(dtype), t, h0)
    out = explain_captured(program, x.to(dtype), t, h0)
    assert (out.graph_count, out.graph_break_count) == (1, 0)
    for e, a in zip([*expected[0], expected[1]], [*out.result[0], out.result[1]]):
        assert torch.equal(e, a)


def test_new_batch_size_keeps_eager_results():
    """Another batch size makes the inputs' sizes symbolic (automatic dynamic): symbolic lengths are not read."""
    program = chain(make(batch_first=True), enforce_sorted=False)
    compiled = dynacap.optimize(program, backend="eager")
    for lengths in ([5, 3, 2], [5, 3, 2, 4], [1, 2, 3, 4, 5], [4, 4]):
        x, t = inputs(lengths)
        assert_same(program(x, t), compiled(x, t))


@pytest.mark.parametrize("lengths", [[3, 3, 3], [1, 1], [4], [4, 4, 1], [5, 4, 3, 2, 1]], ids=str)
@pytest.mark.parametrize("layers, bidirectional", [(1, False), (2, True)])
def test_bit_for_bit(lengths, layers, bidirectional):
    """As ATen's CPU kernels compute: the cells step by step, or (all lengths equal) its fused padded kernel."""
    lstm = make(num_layers=layers, bidirectional=bidirectional).eval()
    program = chain(lstm, batch_first=False, with_hx=True)
    x, t = inputs(lengths, batch_first=False, steps=max(lengths))
    expected = program(x, t)
    out = dynacap.explain(program)(x, t)
    assert (out.graph_count, out.graph_break_count) == (1, 0)
    for e, a in zip(expected, out.result):
        assert torch.equal(e, a)


def test_export_does_not_fix_the_lengths():
    """An exported program has no guards: packing stays a data-dependent break there (an ExportError)."""
    from dynacap.export import ExportError, export

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = make(batch_first=True).eval()

        def forward(self, x, lengths):
            return chain(self.lstm)(x, lengths)[0]

    with pytest.raises(ExportError, match="depends on tensor data"):
        export(Model(), inputs([5, 3, 2]))
