"""Packing, packed recurrent layers and unpacking, captured once the lengths are known (``known_values``).

``torch._pack_padded_sequence`` (behind ``pack_padded_sequence``), the
``nn.LSTM``/``GRU``/``RNN`` forward on a ``PackedSequence`` and
``torch._pad_packed_sequence`` (behind ``pad_packed_sequence``) become the tensor operations of
``models.packed_sequences`` when the lengths or batch sizes they read are
known at capture time: then the packed shapes are static and the whole chain
is one graph.  Where eager would raise (lengths out of order, longer than the
input, arguments of the wrong shape) or the values are unknown it is a break,
and the real kernel runs eagerly.
"""
from __future__ import annotations

import torch
from torch.nn.utils.rnn import PackedSequence

from ..errors import GraphBreak
from .constant import ConstantValue
from .known_values import known_values

#: The C kernels modelled here (``torch._VF.<name>`` is the same function).
KERNELS = (torch._pack_padded_sequence, torch._pad_packed_sequence)


def call_kernel(tx, fn, args, kwargs):
    """``fn(*args, **kwargs)`` for one of ``KERNELS``; None: the lengths are not known (the caller's graph op)."""
    if kwargs:
        return None
    if fn is torch._pack_padded_sequence:
        return _pack(tx, *args) if len(args) == 3 else None
    return _pad(tx, *args) if len(args) == 5 else None


def _static_tensor(value) -> bool:
    fake = getattr(value, "fake", None)
    return fake is not None and all(isinstance(d, int) for d in fake.shape)


def _int_list(tensor: torch.Tensor) -> list | None:
    if tensor.dim() != 1 or tensor.dtype != torch.int64:
        return None
    return tensor.tolist()


def _model(tx, name: str, args: list):
    from ..models import packed_sequences
    from .wrap import wrap

    return wrap(tx, getattr(packed_sequences, name), None).call(tx, args, {})


def _pack(tx, input, lengths, batch_first):
    known = known_values(tx, lengths)
    if known is None or not _static_tensor(input) or not batch_first.is_constant():
        return None
    lengths_list = _int_list(known)
    shape = input.fake.shape
    batch_first = bool(batch_first.as_constant())
    if lengths_list is None or len(shape) < 2 or input.fake.numel() == 0:
        return None
    steps, batch = (shape[1], shape[0]) if batch_first else (shape[0], shape[1])
    if len(lengths_list) != batch or lengths_list[-1] <= 0 or lengths_list[0] > steps \
            or any(a < b for a, b in zip(lengths_list, lengths_list[1:])):
        raise GraphBreak(f"`pack_padded_sequence` with lengths {lengths_list} for an input of {steps} steps and "
                         f"{batch} sequences raises an error or reads past the input: it runs eagerly")
    batch_sizes = [sum(1 for n in lengths_list if n > t) for t in range(lengths_list[0])]
    return _model(tx, "pack", [input, ConstantValue(tuple(batch_sizes)), ConstantValue(batch_first)])


def _pad(tx, data, batch_sizes, batch_first, padding_value, total_length):
    known = known_values(tx, batch_sizes)
    if known is None or not _static_tensor(data) \
            or not all(v.is_constant() for v in (batch_first, padding_value, total_length)):
        return None
    sizes = _int_list(known)
    total = total_length.as_constant()
    if sizes is None or not sizes or data.fake.dim() < 1 or sum(sizes) != data.fake.shape[0] \
            or not isinstance(total, int) or total < len(sizes) or sizes[-1] <= 0 \
            or any(a < b for a, b in zip(sizes, sizes[1:])):
        raise GraphBreak(f"`pad_packed_sequence` with batch sizes {sizes} for packed data of "
                         f"{list(data.fake.shape)} raises an error: it runs eagerly")
    lengths = [sum(1 for s in sizes if s > b) for b in range(sizes[0])]
    return _model(tx, "pad", [data, ConstantValue(tuple(sizes)), batch_first, padding_value, total_length,
                              ConstantValue(tuple(lengths))])


def is_packed(value) -> bool:
    try:
        return value.python_type() is PackedSequence
    except GraphBreak:
        return False


#: The recurrent layers whose own forward the model stands for.
RECURRENT_LAYERS = (torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN)


def call_recurrent(tx, layer, args, kwargs):
    """``layer(packed, hx=None)`` for an ``nn.LSTM``/``GRU``/``RNN`` ``layer`` (a ``ModuleValue``) on a
    ``PackedSequence``."""
    from .containers import TupleValue

    m = layer.module
    hx = kwargs.get("hx", args[1] if len(args) > 1 else None)
    if len(args) + len(kwargs) > 2 or (kwargs and set(kwargs) != {"hx"}):
        raise GraphBreak(f"{layer.describe()} called with arguments its forward does not take")
    data, batch_sizes, _, _ = args[0].iterate(tx)
    known = known_values(tx, batch_sizes)
    sizes = _int_list(known) if known is not None else None
    if sizes is None or not _static_tensor(data):
        raise GraphBreak(f"{layer.describe()} on a PackedSequence whose batch sizes are known only at run time "
                         "runs eagerly")
    reason = _unsupported(m, data.fake, sizes)
    if reason is not None:
        raise GraphBreak(f"{layer.describe()} on a PackedSequence {reason}: it runs eagerly")
    directions = 2 if m.bidirectional else 1
    hidden_shape = (m.num_layers * directions, sizes[0], m.hidden_size)
    if hx is not None and not _is_none(hx):
        if m.mode == "LSTM":
            states = hx.iterate(tx) if issubclass(hx.python_type(), tuple) else []
            hx = TupleValue(states)
        else:
            states = [hx]
        if len(states) != (2 if m.mode == "LSTM" else 1) \
                or not all(_has_shape(s, hidden_shape, data.fake) for s in states):
            raise GraphBreak(f"{layer.describe()} on a PackedSequence with a hidden state that is not "
                             f"{'two tensors' if m.mode == 'LSTM' else 'a tensor'} of {list(hidden_shape)} "
                             "(an error at run time): it runs eagerly")
    else:
        hx = ConstantValue(None)
    weights = []
    for names in m._all_weights:
        weights.append(TupleValue([layer.getattr(tx, n) for n in names[:2]]
                                  + ([layer.getattr(tx, n) for n in names[2:4]] if m.bias
                                     else [ConstantValue(None), ConstantValue(None)])))
    return _model(tx, "recurrent_module", [ConstantValue(m.mode), args[0], hx, TupleValue(weights),
                                           ConstantValue(tuple(sizes)), ConstantValue(m.num_layers),
                                           ConstantValue(m.bidirectional), ConstantValue(m.hidden_size),
                                           ConstantValue(float(m.dropout)), ConstantValue(m.training)])


def _unsupported(m: torch.nn.RNNBase, data: torch.Tensor, sizes: list) -> str | None:
    """Why the model does not stand for this layer's packed forward, or None."""
    own = next((cls.forward for cls in RECURRENT_LAYERS if isinstance(m, cls)), None)
    if own is None or type(m).forward is not own:
        return "has a forward of its own"
    if m.mode not in ("LSTM", "GRU", "RNN_TANH", "RNN_RELU"):
        return f"has mode {m.mode!r}"
    if getattr(m, "proj_size", 0):
        return "has a projection (proj_size)"
    if m.training and m.dropout and m.num_layers > 1:
        return "drops out between layers in training"
    if torch._C._is_any_autocast_enabled():
        return "under autocast (the fused kernel's own casts)"
    if data.device.type != "cpu":
        return f"on {data.device} (a fused kernel of the device)"
    if data.dim() != 2 or data.shape[1] != m.input_size or not sizes or sum(sizes) != data.shape[0] \
            or any(a < b for a, b in zip(sizes, sizes[1:])) or sizes[-1] <= 0:
        return f"of data {list(data.shape)} and batch sizes {sizes} (an error at run time)"
    params = [p for names in m._all_weights for p in (getattr(m, n) for n in names)]
    if any(p.dtype != data.dtype or p.device != data.device for p in params) \
            or any(a is not b for a, b in zip(m._flat_weights, params)) or len(m._flat_weights) != len(params):
        return "with weights of another dtype or device than its input"
    return None


def _has_shape(value, shape: tuple, data: torch.Tensor) -> bool:
    fake = getattr(value, "fake", None)
    return fake is not None and tuple(fake.shape) == shape and fake.dtype == data.dtype and fake.device == data.device


def _is_none(value) -> bool:
    return value.is_constant() and value.as_constant() is None
