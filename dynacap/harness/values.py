"""Value specs: JSON descriptions of constructor arguments and forward inputs.

Runs inside the case worker.  A spec is JSON; :func:`build` turns it into real
objects with a seeded generator, :func:`describe` summarises real objects for
reports.  Spec forms:

* JSON scalars and ``null`` stand for themselves; a JSON list is a list;
* ``{"tensor": [2, 3], "dtype": "float32", "low": 0, "high": 10}`` is a random
  tensor (normal for floating dtypes, ``randint(low, high)`` for integer ones,
  coin flips for bool; ``"fill": v`` gives a constant tensor instead);
* ``{"tuple": [...]}``, ``{"dict": {...}}`` (a plain JSON object is a dict too);
* ``{"config": {...}}`` is a :class:`SmartConfig` (attribute bag that invents
  plausible values for attributes it was not given, and records them).

It must not import user code; it only builds values.
"""
from __future__ import annotations

import re
from typing import Any

import torch

_DTYPES = {
    "float32": torch.float32, "float": torch.float32, "float64": torch.float64,
    "double": torch.float64, "float16": torch.float16, "half": torch.float16,
    "bfloat16": torch.bfloat16, "int64": torch.int64, "long": torch.int64,
    "int32": torch.int32, "int": torch.int32, "int16": torch.int16,
    "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool,
    "complex64": torch.complex64,
}
_SPECIAL = ("tensor", "tuple", "dict", "config", "factory")


def _make_factory(kind: str):
    """A plain function (``inspect.isfunction`` is true) that builds a layer."""
    if kind == "norm":
        def norm_factory(num_features=None, *args, **kwargs):
            # a torch layer (no harness code runs in forward) that takes any
            # [B, C, *] input
            n = num_features if isinstance(num_features, int) else kwargs.get("num_channels", 1)
            return torch.nn.GroupNorm(1, int(n))
        f = norm_factory
    elif kind == "act":
        def act_factory(*args, **kwargs):
            return torch.nn.ReLU()
        f = act_factory
    else:
        def identity_factory(*args, **kwargs):
            return torch.nn.Identity()
        f = identity_factory
    f._dc_factory = kind
    return f


def dtype_of(name: str) -> torch.dtype:
    return _DTYPES[name.replace("torch.", "")]


def dtype_name(dt: torch.dtype) -> str:
    return str(dt).replace("torch.", "")


def tensor_spec(shape, dtype="float32", **kw) -> dict:
    d = {"tensor": list(shape), "dtype": dtype}
    d.update({k: v for k, v in kw.items() if v is not None})
    return d


def build(spec: Any, gen: torch.Generator | None = None) -> Any:
    """Turn a spec into objects; tensors are drawn from ``gen``."""
    if isinstance(spec, list):
        return [build(s, gen) for s in spec]
    if isinstance(spec, dict):
        if "tensor" in spec:
            return _build_tensor(spec, gen)
        if "tuple" in spec:
            return tuple(build(s, gen) for s in spec["tuple"])
        if "dict" in spec:
            return {k: build(v, gen) for k, v in spec["dict"].items()}
        if "config" in spec:
            return SmartConfig({k: build(v, gen) for k, v in spec["config"].items()})
        if "factory" in spec and len(spec) == 1:
            return _make_factory(spec["factory"])
        return {k: build(v, gen) for k, v in spec.items()}
    return spec


def build_kwargs(specs: dict | None, gen: torch.Generator | None = None) -> dict:
    """Keyword arguments: a mapping from names to specs (the mapping is not a spec)."""
    return {k: build(v, gen) for k, v in (specs or {}).items()}


def _build_tensor(spec: dict, gen) -> torch.Tensor:
    shape = [int(s) for s in spec["tensor"]]
    dt = dtype_of(spec.get("dtype", "float32"))
    if "fill" in spec:
        return torch.full(shape, spec["fill"], dtype=dt)
    if dt == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    if dt.is_floating_point or dt.is_complex:
        t = torch.randn(shape, generator=gen, dtype=torch.float32 if not dt.is_complex else dt)
        if "low" in spec or "high" in spec:
            lo, hi = float(spec.get("low", 0.0)), float(spec.get("high", 1.0))
            t = torch.rand(shape, generator=gen) * (hi - lo) + lo
        return t.to(dt)
    lo, hi = int(spec.get("low", 0)), int(spec.get("high", 10))
    return torch.randint(lo, max(hi, lo + 1), shape, generator=gen, dtype=dt)


def describe(obj: Any, depth: int = 0) -> Any:
    """Short JSON summary of a real value (shapes, not data) for reports."""
    if depth > 4:
        return "..."
    if isinstance(obj, torch.Tensor):
        return f"{dtype_name(obj.dtype)}{list(obj.shape)}"
    if isinstance(obj, SmartConfig):
        return {"config": {k: describe(v, depth + 1) for k, v in obj._dc_values.items()}}
    if isinstance(obj, tuple):
        return {"tuple": [describe(o, depth + 1) for o in obj]}
    if isinstance(obj, list):
        return [describe(o, depth + 1) for o in obj]
    if isinstance(obj, dict):
        return {str(k): describe(v, depth + 1) for k, v in obj.items()}
    if obj is None or isinstance(obj, (int, float, str, bool)):
        return obj
    return type(obj).__name__


# --------------------------------------------------------------------------
# Name-guided guesses for scalar constructor arguments and config attributes.

_BOOL_FALSE = {"pretrained", "inplace", "bidirectional", "batch_first", "training",
               "verbose", "debug", "return_attention", "return_attn", "zero_init",
               "checkpoint", "use_checkpoint", "gradient_checkpointing", "is_training",
               "freeze", "load_weights"}
_BOOL_TRUE = {"bias", "affine", "use_bias", "track_running_stats", "residual",
              "normalize", "learnable"}
_FLOAT_ZERO = re.compile(r"(^|_)(dropout|drop|p|drop_rate|drop_prob|attn_drop|proj_drop|"
                         r"drop_path|drop_path_rate|dropout_rate|dropout_prob|attn_dropout|"
                         r"label_smoothing|smoothing|weight_decay|margin)($|_)")
_FLOAT_ONE = re.compile(r"(^|_)(alpha|beta|gamma|scale|temperature|tau|lambda|lam|"
                        r"weight|factor|sigma|std|init_scale|gain|lr|learning_rate|"
                        r"negative_slope|slope|threshold|value|max_norm|norm_value)($|_)")
_FLOAT_EPS = re.compile(r"(^|_)(eps|epsilon|layer_norm_eps|norm_eps)($|_)")
_SMALL_INT = {  # name -> value
    "num_heads": 2, "n_heads": 2, "nhead": 2, "heads": 2, "n_head": 2, "num_attention_heads": 2,
    "num_layers": 1, "n_layers": 1, "layers": 1, "depth": 1, "n_layer": 1, "num_blocks": 1,
    "num_hidden_layers": 1, "nlayers": 1, "num_stages": 1,
    "stride": 1, "padding": 1, "dilation": 1, "groups": 1, "kernel_size": 3, "kernel": 3,
    "k": 3, "ksize": 3, "scale_factor": 2, "upscale_factor": 2, "upscale": 2,
    "num_classes": 4, "n_classes": 4, "classes": 4, "n_class": 4, "num_class": 4,
    "num_labels": 4, "out_classes": 4, "nclass": 4,
    "vocab_size": 32, "n_vocab": 32, "ntoken": 32, "num_embeddings": 32, "vocab": 32,
    "num_tokens": 32, "n_tokens": 32, "max_len": 64, "max_length": 64, "max_seq_len": 64,
    "max_position_embeddings": 64, "block_size": 64, "seq_len": 8, "context_length": 64,
    "n_positions": 64, "max_seq_length": 64,
    "img_size": 32, "image_size": 32, "input_size_img": 32, "patch_size": 4, "window_size": 4,
    "mlp_ratio": 2, "expansion": 2, "expand_ratio": 2, "ratio": 2, "reduction": 2,
    "n_channels": 3, "in_chans": 3, "in_channels_img": 3, "input_channels": 3,
    "num_channels": 3, "img_channels": 3, "image_channels": 3, "channels_img": 3,
    "batch_size": 2, "num_groups": 2, "groups_norm": 2, "pad": 1, "seed": 0, "level": 1,
    "order": 1, "power": 2, "top_k": 1, "topk": 1, "num_experts": 2, "n_experts": 2,
}
_STRINGS = {"activation": "relu", "act": "relu", "act_fn": "relu", "hidden_act": "relu",
            "nonlinearity": "relu", "activation_fn": "relu", "mode": "nearest",
            "norm": "batch", "norm_type": "batch", "pooling": "avg", "pool": "avg",
            "padding_mode": "zeros", "reduction_mode": "mean", "name": "model",
            "position_embedding_type": "absolute"}


_NO = object()
_FACTORY_NAMES = {"norm_layer", "normalization", "norm_fn", "norm_cls", "norm_func", "act_layer",
                  "act_fn_layer", "activation_layer", "act_cls", "nonlinearity_layer"}


def _ann_str(annotation: Any) -> str:
    if annotation is None or annotation is Any:
        return ""
    try:
        import inspect
        if annotation is inspect.Parameter.empty:
            return ""
    except Exception:  # noqa: BLE001
        pass
    if isinstance(annotation, type) and not getattr(annotation, "__args__", None):
        return annotation.__name__.lower()
    s = str(annotation).lower().replace("typing.", "").replace(" ", "")
    return s.replace("<class'", "").replace("'>", "")


def _split_top(s: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
            continue
        depth += ch == "["
        depth -= ch == "]"
        cur += ch
    if cur:
        out.append(cur)
    return out


def _from_annotation(ann: str, name: str, base: int) -> Any:
    """A value fitting a (lower-cased, typing-stripped) annotation string, or _NO."""
    if ann.startswith("optional[") and ann.endswith("]"):
        ann = ann[len("optional["):-1]
    if "|" in ann and "[" not in ann:
        parts = [p for p in ann.split("|") if p != "none"]
        ann = parts[0] if parts else ""
    if ann.startswith("union[") and ann.endswith("]"):
        parts = [p for p in _split_top(ann[len("union["):-1]) if p != "none" and p != "nonetype"]
        ann = parts[0] if parts else ""
    if ann == "bool":
        return _guess_bool(name)
    if ann == "float":
        return _guess_float(name)
    if ann == "str":
        return _STRINGS.get(name.lower().lstrip("_"), "relu")
    if ann == "int":
        return _SMALL_INT.get(name.lower().lstrip("_"), base)
    for prefix in ("list[", "sequence[", "iterable[", "tuple["):
        if ann.startswith(prefix) and ann.endswith("]"):
            inner = _split_top(ann[len(prefix):-1])
            if prefix == "tuple[" and inner and inner[-1] != "...":
                vals = [_from_annotation(x, "", base) for x in inner]
                vals = [base if v is _NO else v for v in vals]
                return tuple(vals)
            elem = _from_annotation(inner[0] if inner else "int", "", base)
            elem = base if elem is _NO else elem
            return [elem, elem] if prefix != "tuple[" else (elem, elem)
    if ann in ("list", "sequence", "tuple"):
        return [base, base]
    return _NO


def _guess_bool(n: str) -> bool:
    return n.lower().lstrip("_") in _BOOL_TRUE


def _guess_float(n: str) -> float:
    n = n.lower().lstrip("_")
    if _FLOAT_EPS.search(n):
        return 1e-5
    if _FLOAT_ZERO.search(n):
        return 0.0
    return 1.0 if _FLOAT_ONE.search(n) or not n else 0.5


def guess_value(name: str, annotation: Any = None, base: int = 16) -> Any:
    """A plausible value for a required argument or config attribute ``name``."""
    n = name.lower().lstrip("_")
    ann_s = _ann_str(annotation)
    if ("callable" in ann_s or "type[" in ann_s) or n in _FACTORY_NAMES:
        if "norm" in n:
            return _make_factory("norm")
        if "act" in n or "nonlin" in n:
            return _make_factory("act")
        if "callable" in ann_s or "type[" in ann_s:
            return _make_factory("identity")
    if ann_s:
        v = _from_annotation(ann_s, n, base)
        if v is not _NO:
            return v
    if n in _BOOL_FALSE or n in _BOOL_TRUE or n.startswith(("use_", "is_", "has_", "with_", "enable_", "do_")):
        return _guess_bool(n)
    if n in _STRINGS:
        return _STRINGS[n]
    if _FLOAT_EPS.search(n) or _FLOAT_ZERO.search(n) or _FLOAT_ONE.search(n):
        return _guess_float(n)
    if n in _SMALL_INT:
        return _SMALL_INT[n]
    if n.endswith(("_dims", "_sizes", "_channels_list", "channels_list", "_shape", "depths",
                   "dims_list", "hidden_dims", "hidden_sizes", "hidden_layers", "layer_sizes",
                   "filters", "features_list", "blocks", "num_layers_list")):
        return [base, base]
    if n in ("config", "cfg", "conf", "args", "opt", "opts", "hparams", "params",
             "hyperparams", "options", "model_config", "configs", "arg", "hps", "settings"):
        return SmartConfig(base=base)
    return base


class SmartConfig:
    """Stand-in for a config object: attributes and items are invented on demand.

    Every invented value is kept, so the config serialises back to a spec
    (``{"config": {...}}``) and the same values are used in every process.
    """

    def __init__(self, values: dict | None = None, base: int = 16):
        object.__setattr__(self, "_dc_values", dict(values or {}))
        object.__setattr__(self, "_dc_base", base)

    def __getattr__(self, name):
        if name.startswith("_"):      # dunders and private probes are not config fields
            raise AttributeError(name)
        vals = object.__getattribute__(self, "_dc_values")
        if name not in vals:
            vals[name] = guess_value(name, None, object.__getattribute__(self, "_dc_base"))
        return vals[name]

    def __setattr__(self, name, value):
        self._dc_values[name] = value

    def __getitem__(self, key):
        return getattr(self, str(key))

    def __setitem__(self, key, value):
        self._dc_values[str(key)] = value

    def __contains__(self, key):
        return True

    def get(self, key, default=None):
        if key in self._dc_values:
            return self._dc_values[key]
        if default is not None:
            self._dc_values[key] = default
            return default
        return getattr(self, key)

    def __iter__(self):
        return iter(list(self._dc_values))

    def keys(self):
        return list(self._dc_values)

    def items(self):
        return list(self._dc_values.items())

    def __repr__(self):
        return f"SmartConfig({self._dc_values!r})"


def to_spec(obj: Any) -> Any:
    """Spec of a value the inference produced (scalars, lists, tuples, configs)."""
    if callable(obj) and "_dc_factory" in getattr(obj, "__dict__", {}):
        return {"factory": obj.__dict__["_dc_factory"]}
    if isinstance(obj, SmartConfig):
        return {"config": {k: to_spec(v) for k, v in obj._dc_values.items()}}
    if isinstance(obj, tuple):
        return {"tuple": [to_spec(v) for v in obj]}
    if isinstance(obj, list):
        return [to_spec(v) for v in obj]
    if isinstance(obj, dict):
        return {"dict": {str(k): to_spec(v) for k, v in obj.items()}}
    if isinstance(obj, torch.Tensor):
        return tensor_spec(obj.shape, dtype_name(obj.dtype))
    return obj
