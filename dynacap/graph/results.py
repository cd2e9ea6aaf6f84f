"""Result rules: the fake result of a few common operations, known from their arguments' metadata.

The first time a trace meets an operation on given argument metadata, fake propagation dispatches it
(``Propagation.propagate``); ``F.linear``, ``F.layer_norm``, ``F.gelu``, ``F.conv2d``, an eval-mode
``F.batch_norm``, ``torch.cat``, ``addmm``, ``to(dtype)`` and ``a + b``/``a * b``/``a - b`` go there through
a chain of fake dispatches and Python reference implementations, about a millisecond or more each on a
model's first call.  Each rule in ``RESULT_RULES`` answers, for the common case only (inputs of the
layouts it knows, a floating dtype, parameters of the input's dtype and device, no gradient to record),
the metadata ``propagation._fresh`` would record from the dispatched result: shape, strides, dtype,
device and, for a result that is a view of a new tensor, that base's; ``RETURNS_FIRST_ARGUMENT`` says
which in-place kernels return their argument one version up without raising.  Any other call gets None
(False) and is dispatched as usual.  ``tests/test_result_rules.py`` checks every rule against dispatching.
This module must not make tensors: ``Propagation._remake`` does, from what a rule answers.
"""
from __future__ import annotations

import math
import operator

import torch
from torch._subclasses.fake_tensor import FakeTensor

from .effects import storage_of
from .layouts import channels_last_strides, contiguous_strides, elementwise_strides, is_non_overlapping_and_dense

#: Dtypes the rules answer for (integer and complex results are always dispatched).
NORM_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def _dense(t, like=None) -> bool:
    """Whether ``t`` is a fake tensor of a floating dtype with the strides ``empty`` gives its shape, no
    zero-sized dim and no value held (and of ``like``'s dtype and device when given)."""
    return (type(t) is FakeTensor and t.layout is torch.strided and t.dtype in NORM_DTYPES
            and t.constant is None and 0 not in t.shape and t.stride() == contiguous_strides(t.shape)
            and (like is None or (t.dtype == like.dtype and t.device == like.device)))


def _strided(t) -> bool:
    """Whether ``t`` is a fake tensor of a floating dtype, of any strides and offset, with no zero-sized dim
    and no value held."""
    return (type(t) is FakeTensor and t.layout is torch.strided and t.dtype in NORM_DTYPES and t.constant is None
            and 0 not in t.shape)


#: Python numbers an operand may be (a wrapped scalar: it takes the tensor's floating dtype).
_NUMBERS = (int, float, bool)


def _wrapped_number(v) -> bool:
    """Whether ``v`` is a Python number ATen wraps as a scalar (a wider int raises: it fits no int64)."""
    return type(v) in _NUMBERS and -2 ** 63 <= v < 2 ** 63


def _broadcast(*shapes):
    """The sizes ``shapes`` broadcast to, or None where they do not (dispatching raises)."""
    try:
        return torch.broadcast_shapes(*shapes)
    except RuntimeError:
        return None


def _records_grad(*tensors) -> bool:
    """Whether autograd would record the operation (its result would need grad: always dispatched)."""
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def _new(shape, x, view=None) -> tuple:
    """A new contiguous result of ``shape`` with ``x``'s dtype and device, as ``_fresh`` records it."""
    shape = torch.Size(shape)
    return (shape, contiguous_strides(shape), x.dtype, x.device, view)


def _bind(names: tuple, defaults: tuple, args: list, kwargs: dict):
    """Arguments of a call by parameter position (``defaults`` for the last ones), or None if they do not bind."""
    if len(args) > len(names) or any(k not in names[len(args):] for k in kwargs):
        return None
    first_default = len(names) - len(defaults)
    bound = list(args)
    for i in range(len(args), len(names)):
        if names[i] in kwargs:
            bound.append(kwargs[names[i]])
        elif i >= first_default:
            bound.append(defaults[i - first_default])
        else:
            return None
    return bound


def _batch_norm_result(args: list, kwargs: dict):
    """What ``F.batch_norm`` returns in eval mode for an input with contiguous strides and per-channel
    statistics and affine parameters of its dtype (a new contiguous tensor of the input's shape and
    dtype: elementwise operations over the input and the statistics, in the decomposition fake tensors
    run, and in eager's kernel), as ``_fresh`` records it; None for any other call (dispatched as usual).
    Its decomposition is a dozen fake dispatches the first time each shape is seen."""
    bound = _bind(("input", "running_mean", "running_var", "weight", "bias", "training", "momentum", "eps"),
                  (None, None, False, 0.1, 1e-5), args, kwargs)
    if bound is None:
        return None
    x, mean, var, weight, bias, training, momentum, eps = bound
    if (training is not False or type(x) is not FakeTensor or x.dim() < 2 or x.numel() == 0
            or x.dtype not in NORM_DTYPES or x.layout is not torch.strided or x.constant is not None
            or x.stride() != contiguous_strides(x.shape) or type(momentum) not in (float, int)
            or type(eps) not in (float, int)):
        return None
    for t in (mean, var, weight, bias):
        if t is None and (t is mean or t is var):
            return None
        if t is not None and (type(t) is not FakeTensor or t.shape != (x.shape[1],) or t.stride() != (1,)
                              or t.dtype != x.dtype or t.device != x.device or t.constant is not None):
            return None
    if _records_grad(x, weight, bias):
        return None
    return (x.shape, x.stride(), x.dtype, x.device, None)


def _linear_result(args: list, kwargs: dict):
    """``F.linear`` on a dense input of 2 or more dims (or a 2-d input of any strides: a row picked from a
    sequence, a transposed matrix) with a dense weight (and bias) of its dtype: a new contiguous tensor
    of the input's leading dims and the weight's rows.  With a bias and more than two
    dims it is a view (``at::linear`` flattens the input, runs ``addmm`` and views the result back);
    otherwise (``addmm``, or ``matmul``'s folded ``mm`` and ``_unsafe_view``) a tensor of its own."""
    bound = _bind(("input", "weight", "bias"), (None,), args, kwargs)
    if bound is None:
        return None
    x, weight, bias = bound
    if (not (_dense(x) or x.dim() == 2 and _strided(x)) or x.dim() < 2 or not _dense(weight, x) or weight.dim() != 2
            or weight.shape[1] != x.shape[-1] or _records_grad(x, weight, bias)):
        return None
    out = weight.shape[0]
    if bias is not None and (not _dense(bias, x) or bias.shape != (out,)):
        return None
    shape = (*x.shape[:-1], out)
    if bias is None or x.dim() == 2:
        return _new(shape, x)
    base = _new((math.prod(x.shape[:-1]), out), x)
    return _new(shape, x, view=(0, *base[:4]))


def _layer_norm_result(args: list, kwargs: dict):
    """``F.layer_norm`` over the last dims of an input of any strides (a channels-last view included),
    with a dense weight and bias of its dtype: a new contiguous tensor of the input's shape (the
    reference implementation normalizes a contiguous copy and converts back to the input's dtype)."""
    bound = _bind(("input", "normalized_shape", "weight", "bias", "eps"), (None, None, 1e-5), args, kwargs)
    if bound is None:
        return None
    x, normalized, weight, bias, eps = bound
    if (type(x) is not FakeTensor or x.layout is not torch.strided or x.dtype not in NORM_DTYPES
            or x.constant is not None or 0 in x.shape or type(normalized) not in (tuple, list, torch.Size) or not normalized
            or any(type(n) is not int for n in normalized) or type(eps) not in (float, int)
            or len(normalized) > x.dim() or tuple(x.shape[x.dim() - len(normalized):]) != tuple(normalized)
            or _records_grad(x, weight, bias)):
        return None
    for t in (weight, bias):
        if t is not None and (not _dense(t, x) or tuple(t.shape) != tuple(normalized)):
            return None
    return _new(x.shape, x)


def _gelu_result(args: list, kwargs: dict):
    """``F.gelu`` of a dense input: a new contiguous tensor like it (elementwise)."""
    bound = _bind(("input", "approximate"), ("none",), args, kwargs)
    if bound is None:
        return None
    x, approximate = bound
    if not _dense(x) or approximate not in ("none", "tanh") or _records_grad(x):
        return None
    return _new(x.shape, x)


def _pair(v):
    """A conv2d size argument (an int or two ints) as two ints, or None."""
    if type(v) is int:
        return (v, v)
    if type(v) in (tuple, list) and len(v) == 2 and all(type(n) is int for n in v):
        return tuple(v)
    return None


def _conv2d_result(args: list, kwargs: dict):
    """``F.conv2d`` of a 4-d input dense in the contiguous or the channels-last format (a permuted NHWC
    tensor) with a dense weight (and bias) of its dtype, numeric padding: a new tensor of the
    convolution's output shape in the memory format the backend fake tensors ask for picks
    (``_select_conv_backend``, ``_conv_determine_backend_memory_format``: the calls fake propagation
    makes, which then converts the contiguous result with ``.to(memory_format=...)``)."""
    bound = _bind(("input", "weight", "bias", "stride", "padding", "dilation", "groups"), (None, 1, 0, 1, 1),
                  args, kwargs)
    if bound is None:
        return None
    x, weight, bias, stride, padding, dilation, groups = bound
    stride, padding, dilation = _pair(stride), _pair(padding), _pair(dilation)
    if type(x) is FakeTensor and x.dim() == 4 and not _dense(x) and x.stride() == channels_last_strides(x.shape):
        x_dense = x.layout is torch.strided and x.dtype in NORM_DTYPES and x.constant is None and 0 not in x.shape
    else:
        x_dense = _dense(x)
    if (not x_dense or x.dim() != 4 or not _dense(weight, x) or weight.dim() != 4 or None in (stride, padding, dilation)
            or type(groups) is not int or groups < 1 or min(stride) < 1 or min(dilation) < 1 or min(padding) < 0
            or x.shape[1] != weight.shape[1] * groups or weight.shape[0] % groups or _records_grad(x, weight, bias)):
        return None
    if bias is not None and (not _dense(bias, x) or bias.shape != (weight.shape[0],)):
        return None
    spatial = [(n + 2 * p - d * (k - 1) - 1) // s + 1
               for n, k, s, p, d in zip(x.shape[2:], weight.shape[2:], stride, padding, dilation)]
    if min(spatial) < 1:
        return None
    backend = torch._C._select_conv_backend(x, weight, stride=list(stride), padding=list(padding),
                                            dilation=list(dilation), transposed=False, output_padding=[0, 0],
                                            groups=groups, bias=bias)
    shape = (x.shape[0], weight.shape[0], *spatial)
    memory_format = torch._C._conv_determine_backend_memory_format(x, weight, backend)
    if memory_format == torch.channels_last:
        return (torch.Size(shape), channels_last_strides(shape), x.dtype, x.device, None)
    if memory_format not in (torch.contiguous_format, torch.channels_last):
        return None
    return _new(shape, x)



def _cat_result(args: list, kwargs: dict):
    """``torch.cat`` of two or more tensors of one dtype and device, of one rank other than 4 and 5 and the
    same sizes but along ``dim``: a new contiguous tensor whatever their strides (the output takes the
    memory format the inputs suggest, and below 4 dims and above 5 that is always the contiguous one)."""
    bound = _bind(("tensors", "dim"), (0,), args, kwargs)
    if bound is None:
        return None
    tensors, dim = bound
    if type(tensors) not in (list, tuple) or len(tensors) < 2 or type(dim) is not int:
        return None
    first = tensors[0]
    if (not _strided(first) or first.dim() in (0, 4, 5) or not -first.dim() <= dim < first.dim()
            or _records_grad(*tensors)):
        return None
    dim %= first.dim()
    for t in tensors[1:]:
        if (not _strided(t) or t.dtype != first.dtype or t.device != first.device or t.dim() != first.dim()
                or any(a != b for i, (a, b) in enumerate(zip(t.shape, first.shape)) if i != dim)):
            return None
    shape = list(first.shape)
    shape[dim] = sum(t.shape[dim] for t in tensors)
    return _new(shape, first)


def _addmm_result(args: list, kwargs: dict):
    """``torch.addmm(input, mat1, mat2)`` (GPT-2's ``Conv1D``) of fakes of one floating dtype and device:
    ``mat1`` (m, k) and ``mat2`` (k, n) of any strides, ``input`` broadcasting to (m, n); a new contiguous
    (m, n) tensor (``beta``/``alpha``/``out`` are dispatched)."""
    bound = _bind(("input", "mat1", "mat2"), (), args, kwargs)
    if bound is None:
        return None
    bias, mat1, mat2 = bound
    if (not all(_strided(t) and t.dtype == mat1.dtype and t.device == mat1.device for t in bound)
            or mat1.dim() != 2 or mat2.dim() != 2 or mat1.shape[1] != mat2.shape[0] or _records_grad(*bound)):
        return None
    shape = (mat1.shape[0], mat2.shape[1])
    if _broadcast(bias.shape, shape) != shape:
        return None
    return _new(shape, mat1)


#: Dtypes ``_to_dtype_result`` converts between (no complex, quantized or sub-byte types).
_CONVERTIBLE = frozenset({torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32,
                          torch.int16, torch.int8, torch.uint8, torch.bool})


def _to_dtype_result(args: list, kwargs: dict):
    """``x.to(dtype)`` / ``x.to(dtype=dtype)`` into another dtype, ``x`` a fake without overlap and gaps:
    a new tensor of ``x``'s sizes and strides (``_to_copy`` keeps a dense layout).  The same dtype returns
    ``x`` itself, which propagation learns from dispatching."""
    if len(args) == 2 and not kwargs:
        x, dtype = args
    elif len(args) == 1 and set(kwargs) == {"dtype"}:
        x, dtype = args[0], kwargs["dtype"]
    else:
        return None
    if (type(x) is not FakeTensor or type(dtype) is not torch.dtype or dtype == x.dtype or dtype not in _CONVERTIBLE
            or x.dtype not in _CONVERTIBLE or x.layout is not torch.strided or x.constant is not None
            or 0 in x.shape or not is_non_overlapping_and_dense(x.shape, x.stride()) or _records_grad(x)):
        return None
    return (x.shape, x.stride(), dtype, x.device, None)

#: Dtypes an elementwise rule answers for: the reference computes half types in float32, and converting
#: there and back may change the layout of size-1 dims.
_FULL_PRECISION = (torch.float32, torch.float64)


def _binary_result(args: list, kwargs: dict):
    """``a + b``, ``a * b``, ``a - b`` of a fake tensor ``a`` of float32 or float64, with one dim or more, and
    ``b`` a fake of its dtype and device with one dim or more, or a Python number: a new tensor of the
    broadcast sizes, with the strides fake dispatch gives it (``layouts.elementwise_strides``; a number
    takes no part in them).  A 0-dim tensor operand is dispatched: fake dispatch takes another way there."""
    if len(args) != 2 or kwargs:
        return None
    a, b = args
    tensors = [a, b] if type(b) is FakeTensor else [a]
    for t in tensors:
        if (type(t) is not FakeTensor or t.layout is not torch.strided or t.dtype not in _FULL_PRECISION
                or t.dtype != a.dtype or t.device != a.device or t.constant is not None or not t.dim()
                or 0 in t.shape):
            return None
    if len(tensors) == 1 and not _wrapped_number(b) or _records_grad(*tensors):
        return None
    shape = _broadcast(*(t.shape for t in tensors))
    if shape is None:
        return None
    return (shape, elementwise_strides(shape, [(t.shape, t.stride()) for t in tensors]), a.dtype, a.device, None)


def _writes_in_place(x, others) -> bool:
    """Whether an elementwise in-place kernel on ``x`` with the operands ``others`` (fakes or numbers)
    returns ``x`` one version up without raising: ``x`` of a floating dtype, dense without overlap (no
    internal-overlap error), needing no grad recorded, no inference tensor; each operand a number fitting
    an int64, or a fake of ``x``'s dtype and device that broadcasts to ``x``'s sizes and is ``x`` or shares
    no storage with it (no partial-overlap error)."""
    if (type(x) is not FakeTensor or x.layout is not torch.strided or x.dtype not in NORM_DTYPES
            or x.constant is not None or x.is_inference() or not is_non_overlapping_and_dense(x.shape, x.stride())
            or _records_grad(x, *(o for o in others if type(o) is FakeTensor))):
        return False
    for o in others:
        if type(o) in _NUMBERS:
            if not _wrapped_number(o):
                return False
        elif (type(o) is not FakeTensor or o.layout is not torch.strided or o.dtype != x.dtype or o.device != x.device
                or o.constant is not None or (o is not x and storage_of(o) == storage_of(x))
                or _broadcast(x.shape, o.shape) != x.shape):
            return False
    return True


def _relu_in_place(args: list, kwargs: dict) -> bool:
    """``F.relu(x, inplace=True)``."""
    bound = _bind(("input", "inplace"), (False,), args, kwargs)
    return bound is not None and bound[1] is True and _writes_in_place(bound[0], [])


def _unary_in_place(args: list, kwargs: dict) -> bool:
    """``x.relu_()``, ``torch.relu_(x)``."""
    return len(args) == 1 and not kwargs and _writes_in_place(args[0], [])


def _binary_in_place(args: list, kwargs: dict) -> bool:
    """``x += y``, ``x *= y``, ``x -= y``, ``x.add_(y)``... (no ``alpha``)."""
    return len(args) == 2 and not kwargs and _writes_in_place(args[0], args[1:])


#: Operations known to return their first argument, written in place (one version up), without
#: dispatching (``Propagation.propagate`` records it as it records a dispatched one).
RETURNS_FIRST_ARGUMENT = {
    torch.nn.functional.relu: _relu_in_place,
    **{op: _unary_in_place for op in (torch.relu_, "relu_")},
    **{op: _binary_in_place for op in (operator.iadd, operator.imul, operator.isub, "add_", "mul_", "sub_")},
}

#: View operations (functions, and methods by name) whose view of their first argument fake propagation
#: may take from the operation's own kernel run on the fake's meta storage (``Propagation._view_of``):
#: the same sizes, strides and offset, without the Python decompositions fake dispatch runs for several
#: of them (``view``, ``reshape``, ``flatten`` and ``squeeze`` go through ``torch._refs``, a millisecond
#: or more per new shape); the view itself is then made by one ``as_strided`` of the argument.
VIEW_OPERATIONS = frozenset({
    "view", "reshape", "flatten", "unflatten", "squeeze", "unsqueeze", "transpose", "permute", "t", "expand",
    torch.reshape, torch.flatten, torch.squeeze, torch.unsqueeze, torch.transpose, torch.permute, torch.t,
    "unbind", "split", "chunk", torch.unbind, torch.split, torch.chunk,
})
#: Those of them returning a tuple of views (taken from the kernel only without grad mode: autograd marks
#: the views of a multi-output operation made with it, which an ``as_strided`` view would not be).
MULTIPLE_VIEWS = frozenset({"unbind", "split", "chunk", torch.unbind, torch.split, torch.chunk})

#: Functions whose fake result is known from their arguments' metadata in common cases (``_propagate``).
RESULT_RULES = {
    torch.nn.functional.batch_norm: _batch_norm_result,
    torch.nn.functional.linear: _linear_result,
    torch.nn.functional.layer_norm: _layer_norm_result,
    torch.nn.functional.gelu: _gelu_result,
    torch.nn.functional.conv2d: _conv2d_result,
    torch.cat: _cat_result,
    torch.addmm: _addmm_result,
    "to": _to_dtype_result,
    # ``aten.add.Tensor``, ``aten.mul.Tensor``, ``aten.sub.Tensor``, however they are called.
    **{op: _binary_result for op in (operator.add, operator.mul, operator.sub, torch.add, torch.mul, torch.sub,
                                     "add", "mul", "sub")},
}
