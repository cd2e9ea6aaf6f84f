"""Packed sequences with batch sizes known at capture time, as tensor operations (traced in the kernels' place).

``torch._pack_padded_sequence``, ``torch._pad_packed_sequence`` and the
packed ``LSTM`` kernel read their ``lengths``/``batch_sizes`` on the host, so
fake tensors cannot run them.  Once those values are known
(``values.known_values``, guarded) each is a fixed arrangement of slices,
concatenations and LSTM cells, written here as ATen's CPU kernels compute
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


def lstm_module(packed, hx, weights, batch_sizes, num_layers, bidirectional, hidden_size, dropout, training):
    """``nn.LSTM.forward`` on a ``PackedSequence``: the hidden state in the packed order and back."""
    data, sizes, sorted_indices, unsorted_indices = packed
    if hx is None:
        shape = (num_layers * (2 if bidirectional else 1), batch_sizes[0], hidden_size)
        h = torch.zeros(shape, dtype=data.dtype, device=data.device)
        c = torch.zeros(shape, dtype=data.dtype, device=data.device)
    else:
        h, c = hx
        if sorted_indices is not None:
            h, c = h.index_select(1, sorted_indices), c.index_select(1, sorted_indices)
    if batch_sizes[0] == batch_sizes[-1]:
        # Sequences all as long as the longest: eager's kernel runs them as padded ones (its fused CPU kernel).
        flat = [w for group in weights for w in group if w is not None]
        padded = data.reshape(len(batch_sizes), batch_sizes[0], data.shape[1])
        output, h, c = torch.lstm(padded, (h, c), flat, weights[0][2] is not None, num_layers, dropout, training,
                                  bidirectional, False)
        output = output.flatten(0, 1)
    else:
        output, h, c = lstm(data, batch_sizes, h, c, weights, num_layers, bidirectional)
    if unsorted_indices is not None:
        h, c = h.index_select(1, unsorted_indices), c.index_select(1, unsorted_indices)
    return PackedSequence(output, sizes, sorted_indices, unsorted_indices), (h, c)


def lstm(data, batch_sizes, hx, cx, weights, num_layers, bidirectional):
    """``_VF.lstm`` on packed data: ``(output, h_n, c_n)``; ``weights[i]`` is ``(w_ih, w_hh, b_ih, b_hh)`` of
    layer ``i // directions``, direction ``i % directions`` (biases may be None)."""
    directions = 2 if bidirectional else 1
    layer_input = data
    h_n = []
    c_n = []
    for layer in range(num_layers):
        outputs = []
        for direction in range(directions):
            index = layer * directions + direction
            w_ih, w_hh, b_ih, b_hh = weights[index]
            # ATen's CPU kernel computes the input projection of every step at once.
            projected = F.linear(layer_input, w_ih, b_ih)
            run = _reverse_layer if direction else _forward_layer
            output, h, c = run(projected, batch_sizes, hx[index], cx[index], w_hh, b_hh)
            outputs.append(output)
            h_n.append(h)
            c_n.append(c)
        layer_input = torch.cat(outputs, outputs[0].dim() - 1) if bidirectional else outputs[0]
    return layer_input, torch.stack(h_n), torch.stack(c_n)


def _cell(projected, h, c, w_hh, b_hh):
    gates = F.linear(h, w_hh, b_hh) + projected
    in_gate, forget_gate, cell_gate, out_gate = gates.unsafe_chunk(4, 1)
    c = forget_gate.sigmoid() * c + in_gate.sigmoid() * cell_gate.tanh()
    return out_gate.sigmoid() * c.tanh(), c


def _forward_layer(projected, batch_sizes, h, c, w_hh, b_hh):
    """Steps in order; a sequence that ends leaves its final state behind (the batch only shrinks)."""
    outputs = []
    finals = []
    offset = 0
    last = batch_sizes[0]
    for size in batch_sizes:
        step = projected[offset:offset + size]
        offset += size
        if size < last:
            finals.append((h[size:last], c[size:last]))
            h, c = h[:size], c[:size]
        last = size
        h, c = _cell(step, h, c, w_hh, b_hh)
        outputs.append(h)
    finals.append((h, c))
    finals.reverse()
    return torch.cat(outputs), torch.cat([f[0] for f in finals]), torch.cat([f[1] for f in finals])


def _reverse_layer(projected, batch_sizes, h0, c0, w_hh, b_hh):
    """Steps from the last; a sequence joins (with its initial state) at its own last step."""
    outputs = []
    offset = projected.shape[0]
    last = batch_sizes[-1]
    h, c = h0[:last], c0[:last]
    for size in reversed(batch_sizes):
        if size > last:
            h = torch.cat([h, h0[last:size]])
            c = torch.cat([c, c0[last:size]])
        step = projected[offset - size:offset]
        offset -= size
        last = size
        h, c = _cell(step, h, c, w_hh, b_hh)
        outputs.append(h)
    outputs.reverse()
    return torch.cat(outputs), h, c
