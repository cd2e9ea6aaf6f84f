"""Instantiation and input inference: find constructor args and forward inputs.

Runs inside the case worker.  Starting from defaults and name/annotation
guesses (see :mod:`dynacap.harness.values`), it tries candidate constructor
arguments and candidate forward inputs (images ``[B,C,H,W]``, sequences
``[B,T,D]``, features ``[B,D]``, token ids), using the module's first layers
and the error messages of failed tries to steer the next candidates.  Search
is bounded by a number of tries and a time budget.  It returns *specs* so that
other processes rebuild identical values.  It must not compile anything, nor
decide statuses beyond "found / not found".
"""
from __future__ import annotations

import copy
import inspect
import json
import re
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import nn

from .values import SmartConfig, build, build_kwargs, guess_value, tensor_spec, to_spec

B = 2          # batch
T = 8          # sequence length
IMG_SIZES = (32, 28, 64, 16, 224, 8, 128, 96, 256)


@dataclass
class Found:
    """Result of a successful search."""
    init_args: list
    init_kwargs: dict
    args: list
    kwargs: dict
    tries: int
    obj: Any = None           # the instantiated module or the function
    output: Any = None        # first output


@dataclass
class Failed(Exception):
    stage: str                # "init" | "forward"
    message: str
    tb: str
    tries: int
    attempts: list = field(default_factory=list)

    def __str__(self):
        return f"{self.stage}: {self.message}"


def seeded(seed: int) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def seed_all(seed: int) -> None:
    import random
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy as np
        np.random.seed(seed)
    except Exception:  # numpy absent or broken
        pass


def build_inputs(args_spec, kwargs_spec, seed: int):
    """Fresh forward inputs from specs; the same seed gives the same values."""
    return build(list(args_spec or []), seeded(seed)), build_kwargs(kwargs_spec, seeded(seed + 1))


def _fmt_exc(e: BaseException) -> str:
    return "".join(traceback.format_exception(type(e), e, e.__traceback__))[-6000:]


def _required(sig: inspect.Signature, skip_first: bool) -> list[inspect.Parameter]:
    params = list(sig.parameters.values())
    if skip_first and params:
        params = params[1:]
    return [p for p in params
            if p.default is inspect.Parameter.empty
            and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


# ---------------------------------------------------------------- constructor
def _init_signature(cls) -> inspect.Signature | None:
    try:
        return inspect.signature(cls.__init__)
    except (TypeError, ValueError):
        return None


def _line_names(e: BaseException, names: list[str]) -> list[str]:
    """Parameter names mentioned on the failing line of user code."""
    tb = traceback.extract_tb(e.__traceback__)
    for fr in reversed(tb):
        if "/torch/" in fr.filename or not fr.line:
            continue
        hits = [n for n in names if re.search(rf"\b{re.escape(n)}\b", fr.line)]
        if hits:
            return hits
    return []


def init_candidates(cls) -> tuple[list[inspect.Parameter], list[dict]]:
    sig = _init_signature(cls)
    if sig is None:
        return [], [{}]
    req = _required(sig, skip_first=True)
    if not req:
        return req, [{}]
    cands = []
    for base in (16, 64, 32, 8, 4, 2, 3, 1):
        cands.append({p.name: guess_value(p.name, p.annotation, base) for p in req})
    return req, cands


def _refine_init(assign: dict, e: BaseException) -> list[dict]:
    msg = str(e)
    names = list(assign)
    hit = _line_names(e, names)
    out = []
    if re.search(r"'int' object is not (iterable|subscriptable)|object of type 'int' has no len", msg):
        for n in hit or names:
            v = assign[n]
            if isinstance(v, int) and not isinstance(v, bool):
                new = dict(assign)
                new[n] = [v, v]
                out.append(new)
            elif not hit and isinstance(v, (list, tuple)) and v and all(
                    isinstance(x, int) and not isinstance(x, bool) for x in v):
                new = dict(assign)         # elements must be iterable too: nest
                new[n] = [list(v), list(v)]
                out.append(new)
    m = re.search(r"unsupported operand type\(s\) for .*?: '(list|tuple)' and|"
                  r"'(list|tuple)' object cannot be interpreted as an integer|"
                  r"must be .*?int.*?not (list|tuple)", msg)
    if m:
        for n in hit or names:
            v = assign[n]
            if isinstance(v, (list, tuple)) and v:
                new = dict(assign)
                new[n] = v[0] if not isinstance(v[0], (list, tuple)) else list(v[0])
                out.append(new)
    m = re.search(r"'(int|float|bool|str|list)' object has no attribute '(\w+)'", msg)
    if m:
        for n in hit or names:
            if not isinstance(assign[n], SmartConfig):
                new = dict(assign)
                new[n] = SmartConfig()
                out.append(new)
    if re.search(r"'(float|list|tuple)' object cannot be interpreted as an integer|"
                 r"must be int|expected int|integer", msg):
        for n in hit or names:
            v = assign[n]
            if isinstance(v, float):
                new = dict(assign)
                new[n] = max(1, int(v))
                out.append(new)
            elif isinstance(v, list) and v and isinstance(v[0], int):
                new = dict(assign)
                new[n] = v[0]
                out.append(new)
    if re.search(r"divisible|must be divis", msg):
        for n in hit or names:
            if isinstance(assign[n], int) and assign[n] > 1:
                new = dict(assign)
                new[n] = 1 if re.search(r"head", n) else assign[n] * 2
                out.append(new)
    if re.search(r"'NoneType'|NoneType", msg) and hit:
        for n in hit:
            new = dict(assign)
            new[n] = SmartConfig() if not isinstance(assign[n], SmartConfig) else 16
            out.append(new)
    return out


# ---------------------------------------------------------------- forward
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


def _key(x) -> str:
    return json.dumps(x, sort_keys=True, default=repr)


def _norm_msg(msg: str) -> str:
    return re.sub(r"\d+", "#", msg)[:200]


# ---------------------------------------------------------------- search
def search(target, kind: str, *, seed: int, init_args=None, init_kwargs=None,
           args=None, kwargs=None, max_tries: int = 60, budget_s: float = 30.0,
           call: Callable | None = None) -> Found:
    """Find a runnable (object, inputs) for ``target``; raises :class:`Failed`.

    Explicit specs are used as given (and not searched).  ``call(obj, args,
    kwargs)`` runs one eager forward (the worker passes a no-grad runner).
    """
    call = call or (lambda f, a, k: f(*a, **k))
    budget = _Budget(max_tries, budget_s)
    first_err: tuple[str, str, str] | None = None
    attempts: list = []

    # constructor candidates
    if kind == "module":
        if init_args is not None or init_kwargs is not None:
            req_names, init_cands = [], [None]
        else:
            req, cands = init_candidates(target)
            req_names = [p.name for p in req]
            init_cands = cands
    else:
        req_names, init_cands = [], [None]

    tried_init: set[str] = set()
    instances = 0
    queue = list(init_cands)
    while queue and not budget.exhausted() and instances < 4:
        assign = queue.pop(0)
        k = _key(to_spec(assign))
        if k in tried_init:
            continue
        tried_init.add(k)
        if kind == "module":
            if assign is None:
                i_args, i_kwargs = list(init_args or []), dict(init_kwargs or {})
                built_args, built_kwargs = build(i_args, seeded(seed)), build_kwargs(i_kwargs, seeded(seed))
            else:
                i_args, i_kwargs = [], {n: to_spec(assign[n]) for n in req_names}
                built_args, built_kwargs = [], copy.deepcopy(assign)
            seed_all(seed)
            budget.tries += 1
            try:
                obj = target(*built_args, **built_kwargs)
                if isinstance(obj, nn.Module):
                    obj.eval()
            except Exception as e:   # noqa: BLE001 - user code may raise anything
                if first_err is None:
                    first_err = ("init", f"{type(e).__name__}: {e}", _fmt_exc(e))
                attempts.append({"init": _key(to_spec(assign)), "error": f"{type(e).__name__}: {e}"[:300]})
                if assign is not None:
                    queue[:0] = [c for c in _refine_init(assign, e) if _key(to_spec(c)) not in tried_init]
                continue
            # SmartConfig may have grown during __init__; record what it handed out
            if assign is not None:
                i_kwargs = {n: to_spec(built_kwargs[n]) for n in req_names}
            instances += 1
            fn = obj
            fwd = getattr(obj, "forward", None)
        else:
            i_args, i_kwargs = [], {}
            obj = fn = target
            fwd = target
        try:
            found = _search_inputs(fn, fwd, obj, seed, args, kwargs, call, budget, attempts)
        except _InputsFailed as f:
            if first_err is None or first_err[0] == "init":
                first_err = f.first
            if args is not None or f.fatal:
                break
            continue
        return Found(i_args, i_kwargs, found[0], found[1], budget.tries, obj, found[2])
    if first_err is None:
        first_err = ("init", "no candidate constructor arguments left", "")
    raise Failed(first_err[0], first_err[1], first_err[2], budget.tries, attempts[-20:])


class _Budget:
    def __init__(self, max_tries: int, seconds: float):
        self.tries, self.max_tries = 0, max_tries
        self.deadline = time.monotonic() + seconds

    def exhausted(self) -> bool:
        return self.tries >= self.max_tries or time.monotonic() > self.deadline


class _InputsFailed(Exception):
    def __init__(self, first, fatal=False):
        super().__init__(first[1])
        self.first, self.fatal = first, fatal


def _search_inputs(fn, fwd, obj, seed, args, kwargs, call, budget, attempts):
    if args is not None or kwargs is not None:
        specs_list = [list(args or [])]
        kw = dict(kwargs or {})
    else:
        try:
            sig = inspect.signature(fwd)
        except (TypeError, ValueError):
            sig = None
        params = [p for p in (sig.parameters.values() if sig else [])
                  if p.default is inspect.Parameter.empty
                  and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if sig is None or any(p.kind == p.VAR_POSITIONAL for p in sig.parameters.values()) and not params:
            params = [inspect.Parameter("x", inspect.Parameter.POSITIONAL_ONLY)]
        hint = _first_layer_hint(obj) if isinstance(obj, nn.Module) else None
        specs_list = forward_candidates(params, hint)
        kw = {}
    tried: set[str] = set()
    local = 0
    first = None
    errs: dict[str, int] = {}
    queue = list(specs_list)
    while queue:
        if local and (budget.exhausted() or local >= 40):
            break
        specs = queue.pop(0)
        k = _key(specs)
        if k in tried:
            continue
        tried.add(k)
        local += 1
        budget.tries += 1
        seed_all(seed)
        a, kwv = build_inputs(specs, kw, seed)
        try:
            out = call(fn, a, kwv)
        except Exception as e:  # noqa: BLE001
            if first is None:
                first = ("forward", f"{type(e).__name__}: {e}", _fmt_exc(e))
            attempts.append({"args": k[:300], "error": f"{type(e).__name__}: {e}"[:300]})
            if args is not None or kwargs is not None:
                break
            new = [c for c in _refine_forward(specs, e) if _key(c) not in tried]
            queue[:0] = new
            nm = _norm_msg(str(e))
            errs[nm] = errs.get(nm, 0) + 1
            if errs[nm] >= 8 and not new:
                break       # the same error whatever the input: a bug, not a shape
            continue
        return specs, kw, out
    raise _InputsFailed(first or ("forward", "no candidate inputs left", ""),
                        fatal=args is not None or kwargs is not None)
