"""Packed sequences with batch sizes known at capture time, as tensor operations (traced in the kernels' place).

``torch._pack_padded_sequence``, ``torch._pad_packed_sequence`` and the
packed recurrent kernels (``_VF.lstm``, ``gru``, ``rnn_tanh``, ``rnn_relu``)
read their ``lengths``/``batch_sizes`` on the host, so fake tensors cannot
run them.  Once those values are known
(``values.known_values``, guarded) each is a fixed arrangement of slices,
concatenations and recurrent cells, written here as ATen's CPU kernels compute
them (the same slices, the same order of additions), so results are eager's.
``values.packed_sequences`` decides when these apply; nothing here checks
arguments.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.nn.utils.rnn import PackedSequence


def pack(input, batch_sizes, batch_first):
    """``(data, batch_sizes)``: step ``t``'s first ``batch_sizes[t]`` sequences, one step after another."""
    if batch_first:
        input = input.transpose(0, 1)
    steps = [input[t, :size] for t, size in enumerate(batch_sizes)]
    return torch.cat(steps), torch.tensor(batch_sizes, dtype=torch.int64)


def pad(data, batch_sizes, batch_first, padding_value, total_length, lengths):
    """``(padded, lengths)``: each step's rows, then ``padding_value`` up to the batch and to ``total_length``."""
    max_batch = batch_sizes[0]
    rest = data.shape[1:]
    steps = []
    offset = 0
    for size in batch_sizes:
        step = data[offset:offset + size]
        offset += size
        if size < max_batch:
            step = torch.cat([step, data.new_full((max_batch - size, *rest), padding_value)])
        steps.append(step)
    for _ in range(total_length - len(batch_sizes)):
        steps.append(data.new_full((max_batch, *rest), padding_value))
    padded = torch.stack(steps)
    if batch_first:
        padded = padded.transpose(0, 1)
    return padded, torch.tensor(lengths, dtype=torch.int64)


def recurrent_module(mode, packed, hx, weights, batch_sizes, num_layers, bidirectional, hidden_size, dropout,
                     training):
    """``nn.LSTM``/``nn.GRU``/``nn.RNN``'s forward (``mode`` as ``RNNBase.mode``) on a ``PackedSequence``: the
    hidden state in the packed order and back.  ``weights[i]`` is ``(w_ih, w_hh, b_ih, b_hh)`` of layer
    ``i // directions``, direction ``i % directions`` (biases may be None)."""
    data, sizes, sorted_indices, unsorted_indices = packed
    states = 2 if mode == "LSTM" else 1
    if hx is None:
        shape = (num_layers * (2 if bidirectional else 1), batch_sizes[0], hidden_size)
        hidden = [torch.zeros(shape, dtype=data.dtype, device=data.device) for _ in range(states)]
    else:
        hidden = list(hx) if mode == "LSTM" else [hx]
        if sorted_indices is not None:
            hidden = [t.index_select(1, sorted_indices) for t in hidden]
    if batch_sizes[0] == batch_sizes[-1]:
        # Sequences all as long as the longest: eager's kernel runs them as padded ones (its fused CPU kernel).
        flat = [w for group in weights for w in group if w is not None]
        padded = data.reshape(len(batch_sizes), batch_sizes[0], data.shape[1])
        fused = {"LSTM": torch.lstm, "GRU": torch.gru, "RNN_TANH": torch.rnn_tanh, "RNN_RELU": torch.rnn_relu}[mode]
        results = fused(padded, tuple(hidden) if mode == "LSTM" else hidden[0], flat, weights[0][2] is not None,
                        num_layers, dropout, training, bidirectional, False)
        output, hidden = results[0].flatten(0, 1), list(results[1:])
    else:
        output, hidden = _layers(_CELLS[mode], data, batch_sizes, hidden, weights, num_layers, bidirectional)
    if unsorted_indices is not None:
        hidden = [t.index_select(1, unsorted_indices) for t in hidden]
    return PackedSequence(output, sizes, sorted_indices, unsorted_indices), \
        (tuple(hidden) if mode == "LSTM" else hidden[0])


def _layers(cell, data, batch_sizes, hidden, weights, num_layers, bidirectional):
    """ATen's packed layers on CPU: ``(output, final states)``, the states a list of ``(layers * directions,
    batch, hidden)`` tensors (h, and c for an LSTM)."""
    directions = 2 if bidirectional else 1
    layer_input = data
    finals = []
    for layer in range(num_layers):
        outputs = []
        for direction in range(directions):
            index = layer * directions + direction
            w_ih, w_hh, b_ih, b_hh = weights[index]
            # ATen's CPU kernel computes the input projection of every step at once.
            projected = F.linear(layer_input, w_ih, b_ih)
            run = _reverse_layer if direction else _forward_layer
            output, final = run(cell, projected, batch_sizes, [t[index] for t in hidden], w_hh, b_hh)
            outputs.append(output)
            finals.append(final)
        layer_input = torch.cat(outputs, outputs[0].dim() - 1) if bidirectional else outputs[0]
    return layer_input, [torch.stack([final[i] for final in finals]) for i in range(len(hidden))]


def _lstm_cell(projected, state, w_hh, b_hh):
    h, c = state
    gates = F.linear(h, w_hh, b_hh) + projected
    in_gate, forget_gate, cell_gate, out_gate = gates.unsafe_chunk(4, 1)
    c = forget_gate.sigmoid() * c + in_gate.sigmoid() * cell_gate.tanh()
    return [out_gate.sigmoid() * c.tanh(), c]


def _gru_cell(projected, state, w_hh, b_hh):
    (h,) = state
    size = h.shape[1]
    gates = F.linear(h, w_hh, b_hh)
    # ATen applies the sigmoids in place on column blocks of its gates: taking them as blocks of a wider
    # tensor keeps its rows-by-rows loops (a contiguous tensor is one loop, which rounds some lanes apart).
    reset, update = (gates[:, :2 * size] + projected[:, :2 * size]).unsafe_chunk(2, 1)
    reset = reset.sigmoid()
    new = (projected[:, 2 * size:] + gates[:, 2 * size:] * reset).tanh()
    return [(h - new) * update.sigmoid() + new]


def _tanh_cell(projected, state, w_hh, b_hh):
    return [(F.linear(state[0], w_hh, b_hh) + projected).tanh()]


def _relu_cell(projected, state, w_hh, b_hh):
    return [(F.linear(state[0], w_hh, b_hh) + projected).relu()]


_CELLS = {"LSTM": _lstm_cell, "GRU": _gru_cell, "RNN_TANH": _tanh_cell, "RNN_RELU": _relu_cell}


def _forward_layer(cell, projected, batch_sizes, state, w_hh, b_hh):
    """Steps in order; a sequence that ends leaves its final state behind (the batch only shrinks)."""
    outputs = []
    finals = []
    offset = 0
    last = batch_sizes[0]
    for size in batch_sizes:
        step = projected[offset:offset + size]
        offset += size
        if size < last:
            finals.append([t[size:last] for t in state])
            state = [t[:size] for t in state]
        last = size
        state = cell(step, state, w_hh, b_hh)
        outputs.append(state[0])
    finals.append(state)
    finals.reverse()
    return torch.cat(outputs), [torch.cat([f[i] for f in finals]) for i in range(len(state))]


def _reverse_layer(cell, projected, batch_sizes, initial, w_hh, b_hh):
    """Steps from the last; a sequence joins (with its initial state) at its own last step."""
    outputs = []
    offset = projected.shape[0]
    last = batch_sizes[-1]
    state = [t[:last] for t in initial]
    for size in reversed(batch_sizes):
        if size > last:
            state = [torch.cat([t, t0[last:size]]) for t, t0 in zip(state, initial)]
        step = projected[offset - size:offset]
        offset -= size
        last = size
        state = cell(step, state, w_hh, b_hh)
        outputs.append(state[0])
    outputs.reverse()
    return torch.cat(outputs), state
