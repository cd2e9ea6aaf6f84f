"""Strides a new tensor gets (contiguous, channels-last, an elementwise result's) and the storage it spans.

``a + b``, ``a * b`` and ``a - b`` of fake tensors with static sizes run their Python meta (the
``torch._refs`` reference: ``_maybe_broadcast`` expands the operands to the common sizes, and the
prim's meta picks the result's layout with
``_prims_common.compute_elementwise_output_logical_to_physical_perm`` and makes it with
``empty_permuted``); fake dispatch around it costs about a millisecond the first time each layout is
met (a model's stages each meet a new one).  ``elementwise_strides`` answers the same strides from the
operands' sizes and strides, step by step:

1. the operands expanded to the common sizes (``expand``: a broadcast dim has stride 0);
2. all contiguous and not all channels-last: contiguous; all channels-last and not all contiguous:
   channels-last;
3. otherwise an insertion sort of the dims, innermost last, where the first operand with two
   non-zero strides decides a pair (equal strides: the longer dim goes inside);
4. dense strides in that order (``empty_permuted``).

``tests/test_capture_speed.py`` checks it against dispatching on random layouts.  This module only
computes strides from sizes and strides: it never looks at a tensor.
"""
from __future__ import annotations


def contiguous_strides(shape) -> tuple:
    """The strides ``torch.empty(shape)`` has."""
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def channels_last_strides(shape) -> tuple:
    """The strides ``torch.empty(shape, memory_format=torch.channels_last)`` has (4-d)."""
    n, c, h, w = shape
    return (h * w * c, 1, w * c, c)


def storage_length(shape, stride) -> int:
    """Elements a dense tensor of these sizes and strides spans (what ``empty_strided`` allocates)."""
    if 0 in shape:
        return 0
    return 1 + sum((n - 1) * s for n, s in zip(shape, stride))


def _is_contiguous(shape, stride) -> bool:
    """``is_contiguous`` (``TensorImpl::compute_contiguous``): size-1 dims may have any stride."""
    expected = 1
    for n, s in zip(reversed(shape), reversed(stride)):
        if n != 1:
            if s != expected:
                return False
            expected *= n
    return True


def _is_channels_last(shape, stride) -> bool:
    """``is_contiguous(memory_format=torch.channels_last)``: only 4-d tensors ever are."""
    if len(shape) != 4:
        return False
    expected = 1
    for d in (1, 3, 2, 0):
        if shape[d] != 1:
            if stride[d] != expected:
                return False
            expected *= shape[d]
    return True


def is_non_overlapping_and_dense(shape, stride) -> bool:
    """``TensorImpl::compute_non_overlapping_and_dense``: the dims of size 2 or more, by stride, tile
    the storage."""
    required = 1
    for d in sorted((d for d in range(len(shape)) if shape[d] >= 2), key=lambda d: stride[d]):
        if stride[d] != required:
            return False
        required *= shape[d]
    return True


def expanded_strides(shape, operand_shape, operand_stride) -> tuple:
    """The strides of ``operand.expand(shape)`` (ATen's ``inferExpandGeometry``): 0 along a dim it is
    broadcast along; a new leading dim of size 1 gets the stride a contiguous one would."""
    strides = [0] * len(shape)
    offset = len(shape) - len(operand_shape)
    for i in range(len(shape) - 1, -1, -1):
        if i >= offset:
            size, stride = operand_shape[i - offset], operand_stride[i - offset]
        else:
            size, stride = 1, (shape[i + 1] * strides[i + 1] if i + 1 < len(shape) else 1)
        strides[i] = 0 if size != shape[i] else stride
    return tuple(strides)


def _output_order(shape, strides: list) -> list:
    """``compute_elementwise_output_logical_to_physical_perm`` for operands of sizes ``shape``: the
    dims outermost first."""
    ndim = len(shape)
    if not strides or ndim == 0:
        return []
    if ndim == 1:
        return [0]
    contiguous = all(_is_contiguous(shape, st) for st in strides)
    channels_last = all(_is_channels_last(shape, st) for st in strides)
    if contiguous and not channels_last:
        return list(range(ndim))
    if channels_last and not contiguous:
        return [0, *range(2, ndim), 1]

    def should_swap(a: int, b: int) -> int:
        for st in strides:
            sa, sb = st[a], st[b]
            if sa == 0 or sb == 0:
                continue  # broadcast along one of them: the next operand decides
            if sa == sb:
                if shape[b] >= shape[a]:
                    continue
                return 1
            return -1 if sb > sa else 1
        return 0

    perm = list(range(ndim - 1, -1, -1))
    for i in range(1, ndim):
        dim1 = i
        for dim0 in range(i - 1, -1, -1):
            comparison = should_swap(perm[dim0], perm[dim1])
            if comparison > 0:
                perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
                dim1 = dim0
            elif comparison < 0:
                break
    return perm[::-1]


def elementwise_strides(shape, operands: list) -> tuple:
    """The strides of an elementwise result of ``shape`` (the operands' common sizes) under fake
    dispatch; ``operands`` holds ``(sizes, strides)`` of each tensor operand (one dim or more), in
    argument order."""
    strides = [tuple(st) if tuple(s) == tuple(shape) else expanded_strides(shape, s, st) for s, st in operands]
    out, step = [0] * len(shape), 1
    for d in reversed(_output_order(shape, strides)):  # ``empty_permuted``: dense, innermost last
        out[d] = step
        step *= shape[d]
    return tuple(out)
