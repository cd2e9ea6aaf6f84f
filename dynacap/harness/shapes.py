"""Forward-input candidates: shapes to try, and how error messages refine them.

Runs inside the case worker, for :mod:`dynacap.harness.inference`.  Proposes
input specs from the first layers of a module and its declared input size
(images ``[B,C,H,W]``, sequences ``[B,T,D]``, features ``[B,D]``, token ids),
and turns an error message of a failed forward into new candidates (channel
counts, matrix shapes, ranks, dtypes, sizes).  Pure functions over specs: it
must not call the model or keep state.
"""
from __future__ import annotations

import inspect
import re

from torch import nn

from .values import tensor_spec

B = 2          # batch
T = 8          # sequence length
IMG_SIZES = (32, 28, 64, 16, 224, 8, 128, 96, 256)


def _size_hint(model: nn.Module) -> int | None:
    """Input resolution a model declares (pytorchcv ``in_size``, timm ``pretrained_cfg``...)."""
    for attr in ("in_size", "img_size", "image_size", "input_size", "input_resolution"):
        v = getattr(model, attr, None)
        if isinstance(v, int) and 8 <= v <= 1024:
            return v
        if isinstance(v, (tuple, list)) and v and all(isinstance(x, int) for x in v) and 8 <= v[-1] <= 1024:
            return v[-1]
    for attr in ("pretrained_cfg", "default_cfg"):
        cfg = getattr(model, attr, None)
        if isinstance(cfg, dict) and isinstance(cfg.get("input_size"), (tuple, list)):
            v = cfg["input_size"]
            if v and isinstance(v[-1], int) and 8 <= v[-1] <= 1024:
                return v[-1]
    return None


def _first_layer_hint(model: nn.Module) -> dict | None:
    """Shape hints: the model's declared input size, and the first layer that
    constrains its input."""
    hint = _layer_hint(model)
    size = _size_hint(model)
    if size:
        hint = dict(hint or {"rank": 4}, size=size)
    return hint


def _layer_hint(model: nn.Module) -> dict | None:
    for m in model.modules():
        name = type(m).__name__
        if isinstance(m, (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d,
                          nn.ConvTranspose2d, nn.ConvTranspose3d)):
            c = m.in_channels if not isinstance(m, nn.modules.lazy.LazyModuleMixin) else 3
            rank = {1: 3, 2: 4, 3: 5}[len(m.kernel_size)]
            return {"rank": rank, "dim1": c}
        if isinstance(m, nn.Embedding) or isinstance(m, nn.EmbeddingBag):
            return {"ids": True, "high": m.num_embeddings}
        if isinstance(m, (nn.RNN, nn.LSTM, nn.GRU)):
            return {"rank": 3, "last": m.input_size, "batch_first": m.batch_first}
        if isinstance(m, (nn.RNNCell, nn.LSTMCell, nn.GRUCell)):
            return {"rank": 2, "last": m.input_size}
        if isinstance(m, nn.MultiheadAttention):
            return {"rank": 3, "last": m.embed_dim, "n_same": 3}
        if isinstance(m, nn.Bilinear):
            return {"rank": 2, "last": m.in1_features, "last2": m.in2_features}
        if isinstance(m, nn.Linear) and not isinstance(m, nn.modules.lazy.LazyModuleMixin):
            return {"rank": 2, "last": m.in_features, "ranks": (2, 3, 4)}
        if isinstance(m, nn.LayerNorm):
            ns = list(m.normalized_shape)
            return {"rank": 2 + (len(ns) == 1), "tail": ns}
        if isinstance(m, (nn.BatchNorm2d, nn.InstanceNorm2d)):
            return {"rank": 4, "dim1": m.num_features}
        if isinstance(m, (nn.BatchNorm1d, nn.InstanceNorm1d)):
            return {"rank": 2, "dim1": m.num_features, "ranks": (2, 3)}
        if isinstance(m, (nn.BatchNorm3d, nn.InstanceNorm3d)):
            return {"rank": 5, "dim1": m.num_features}
        if isinstance(m, nn.GroupNorm):
            return {"rank": 4, "dim1": m.num_channels}
        del name
    return None


def _shape(rank: int, dim1: int | None = None, last: int | None = None,
           size: int = 32, tail: list | None = None) -> list[int]:
    if rank <= 0:
        return []
    if rank == 1:
        return [last or dim1 or 16]
    if rank == 2:
        return [B, last or dim1 or 16]
    if tail:
        lead = [B, T][: max(rank - len(tail), 1)]
        return lead + [T] * (rank - len(tail) - len(lead)) + list(tail)
    if rank == 3:
        if dim1 is not None and last is None:
            return [B, dim1, size if size <= 64 else 32]
        return [B, T, last or 16]
    s = [B, dim1 if dim1 is not None else 3] + [size] * (rank - 2)
    if last is not None:
        s[-1] = last
    return s


def _name_kind(name: str) -> str:
    n = name.lower()
    if re.search(r"(^|_)(ids|idx|index|indices|tokens?|token_ids|input_ids|words?|labels?|"
                 r"targets?|classes|chars?|y)$", n):
        return "ids"
    if re.search(r"mask", n):
        return "mask"
    if re.search(r"(^|_)(len|lens|length|lengths|seq_len|seq_lens|n|num|steps?|t|timesteps?)$", n):
        return "int"
    if re.search(r"(img|image|images|pic|picture|frames?)", n):
        return "image"
    if re.search(r"(seq|sequence|src|tgt|query|key|value|hidden_states|embeds|emb|tokens_emb|"
                 r"encoder_out|memory|context)", n):
        return "seq"
    return "tensor"


def _arg_spec(kind: str, hint: dict | None, rank: int | None, size: int) -> dict | int:
    hint = hint or {}
    if kind == "ids" or (hint.get("ids") and kind in ("tensor", "seq")):
        high = int(hint.get("high") or 10)
        return tensor_spec([B, T], "int64", low=0, high=max(1, min(high, 10)))
    if kind == "mask":
        return tensor_spec([B, T], "bool", fill=True)
    if kind == "int":
        return T
    if rank is None:
        rank = hint.get("rank") or (4 if kind == "image" else 3 if kind == "seq" else 4)
    return tensor_spec(_shape(rank, hint.get("dim1"), hint.get("last"), size, hint.get("tail")))


def forward_candidates(params: list[inspect.Parameter], hint: dict | None) -> list[list]:
    """Initial candidate lists of positional arg specs."""
    if not params:
        return [[]]
    kinds = [_name_kind(p.name) for p in params]
    ranks: list[int | None] = []
    if hint and hint.get("rank"):
        ranks.append(hint["rank"])
        ranks.extend(r for r in hint.get("ranks", ()) if r not in ranks)
    ranks.extend(r for r in (4, 3, 2, 1, 5) if r not in ranks)
    cands = []
    first_hint = hint
    for r in ranks:
        sizes = IMG_SIZES[:3] if r >= 4 else (32,)
        if hint and hint.get("size") and r >= 4:
            sizes = (hint["size"],) + tuple(x for x in sizes if x != hint["size"])
        for size in sizes:
            specs = []
            for i, k in enumerate(kinds):
                h = first_hint if (i == 0 or k == "tensor") else None
                if hint and hint.get("last2") and i == 1:
                    h = dict(hint, last=hint["last2"])
                specs.append(_arg_spec(k, h, r, size))
            cands.append(specs)
    if hint and hint.get("ids"):
        cands.insert(0, [_arg_spec("ids", hint, None, 32)] + cands[0][1:])
    # generic token ids as a last resort for the first argument
    cands.append([tensor_spec([B, T], "int64", low=0, high=10)] + (cands[0][1:] if cands else []))
    return cands


def _set_dim(spec: dict, dim: int, value: int) -> dict | None:
    shape = list(spec["tensor"])
    if not -len(shape) <= dim < len(shape) or shape[dim] == value:
        return None
    shape[dim] = value
    return dict(spec, tensor=shape)


def _with_rank(spec: dict, rank: int) -> dict:
    shape = list(spec["tensor"])
    if rank == len(shape):
        return spec
    if len(shape) >= 2 and rank >= 2:
        new = _shape(rank, dim1=shape[1] if rank >= 4 or len(shape) >= 4 else None,
                     last=shape[-1] if rank <= 3 and len(shape) <= 3 else None)
    else:
        new = _shape(rank, last=shape[-1] if shape else None)
    return dict(spec, tensor=new)


def _refine_forward(specs: list, e: BaseException) -> list[list]:
    """New candidates suggested by the error of a failed forward."""
    msg = str(e)
    idx = next((i for i, s in enumerate(specs) if isinstance(s, dict) and "tensor" in s), None)
    if idx is None:
        return []
    s0 = specs[idx]
    out: list[dict] = []

    def add(new):
        if new is not None:
            out.append(new)

    shape = list(s0["tensor"])
    m = re.search(r"[Ee]xpected (\d+)D \((un)?batched\) or (\d+)D \((un)?batched\) input", msg)
    if m:
        r1, r2 = int(m.group(1)), int(m.group(3))
        add(_with_rank(s0, max(r1, r2)))
        add(_with_rank(s0, min(r1, r2)))
    for pat in (r"expected (\d+)D input \(got (\d+)D input\)", r"[Ee]xpected (\d+)-dimensional input",
                r"input must have (\d+) dimensions", r"should be (?:unbatched \d+D or )?batched (\d+)D",
                r"[Ee]xpected (\d+)D", r"expected (\d+) dims"):
        m = re.search(pat, msg)
        if m:
            add(_with_rank(s0, int(m.group(1))))
            break
    m = re.search(r"to have (\d+) channels", msg)
    if m and len(shape) >= 2:
        add(_set_dim(s0, 1, int(m.group(1))))
    m = re.search(r"running_mean should contain (\d+) elements", msg)
    if m and len(shape) >= 2:
        add(_set_dim(s0, 1, int(m.group(1))))
    m = re.search(r"mat1 and mat2 shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)", msg)
    if m:
        k = int(m.group(3))
        add(_set_dim(s0, -1, k))
        if len(shape) >= 3:   # flattened image/sequence: try a fitting square size
            c = shape[1]
            for sz in IMG_SIZES:
                if len(shape) == 4 and c * sz * sz == k:
                    add(dict(s0, tensor=[shape[0], c, sz, sz]))
            add(dict(s0, tensor=[shape[0], k]))
    m = re.search(r"expected input with shape \[\*, ([\d, ]+)\]", msg)
    if m:
        tail = [int(x) for x in m.group(1).split(",") if x.strip()]
        add(dict(s0, tensor=(shape[: max(len(shape) - len(tail), 1)] + tail)))
    for pat in (r"input\.size\(-1\) must be equal to input_size\. Expected (\d+)",
                r"was expecting embedding dimension of (\d+)", r"expected input\.size\(-1\) (\d+)",
                r"last dimension .*?(?:be|of) (\d+)", r"Expected size (\d+) for last dim"):
        m = re.search(pat, msg)
        if m:
            add(_set_dim(s0, -1, int(m.group(1))))
    for pat in (r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) at non-singleton "
                r"dimension (\d+)",
                r"expanded size of the tensor \((\d+)\) must match the existing size \((\d+)\) at "
                r"non-singleton dimension (\d+)"):
        m = re.search(pat, msg)
        if m:
            a, b, d = int(m.group(1)), int(m.group(2)), int(m.group(3))
            for dim in (d, d - len(shape)):
                if -len(shape) <= dim < len(shape):
                    if shape[dim] == a:
                        add(_set_dim(s0, dim, b))
                    elif shape[dim] == b:
                        add(_set_dim(s0, dim, a))
    m = re.search(r"not enough values to unpack \(expected (\d+), got (\d+)\)", msg)
    if m:
        add(_with_rank(s0, int(m.group(1))))
    m = re.search(r"too many values to unpack \(expected (\d+)\)", msg)
    if m:
        add(_with_rank(s0, int(m.group(1))))
    m = re.search(r"Dimension out of range \(expected to be in range of \[-(\d+), (\d+)\], but got (-?\d+)\)", msg)
    if m:
        got = int(m.group(3))
        add(_with_rank(s0, max(len(shape) + 1, got + 1 if got >= 0 else -got)))
    is_int = s0.get("dtype", "float32").startswith(("int", "long"))
    if not is_int and re.search(r"scalar type Long|Long, Int|expected scalar type (Long|Int)|must be Long|"
                                r"only integer tensors|Expected tensor for argument #1 'indices'|"
                                r"indices must be|IntTensor|LongTensor|integer tensor", msg):
        lead = shape[:2] if len(shape) >= 2 else [B, T]
        add(tensor_spec(lead, "int64", low=0, high=10))
    if re.search(r"index out of range|out of bounds|index \d+ is out of bounds", msg) and \
            s0.get("dtype", "float32").startswith(("int", "long")):
        add(dict(s0, high=2))
    if is_int and re.search(r"should be the same|scalar type|found Long|found Int|Float|"
                            r"not implemented for 'Long'", msg):
        add(tensor_spec(s0["tensor"], "float32"))
    if len(shape) >= 3 and re.search(r"[Oo]utput size is too small|[Kk]ernel size can't be greater|"
                                     r"smaller than kernel|[Pp]adding size should be less|"
                                     r"must be (at least|greater)|too small", msg):
        for sz in (64, 128, 224, 256):
            if sz > shape[-1]:
                add(dict(s0, tensor=shape[:-2] + [sz, sz] if len(shape) >= 4 else shape[:-1] + [sz]))
    if re.search(r"shape '\[.*\]' is invalid for input of size|Sizes of tensors must match|"
                 r"size mismatch", msg) and len(shape) == 4:
        for sz in IMG_SIZES:
            if sz != shape[-1]:
                add(dict(s0, tensor=[shape[0], shape[1], sz, sz]))
    result = []
    for new in out:
        cand = list(specs)
        cand[idx] = new
        for j, s in enumerate(specs):     # arguments shaped like the first follow it
            if j != idx and s == s0:
                cand[j] = new
        result.append(cand)
    return result
