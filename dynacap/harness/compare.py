"""Comparing a captured run's output with the eager output.

Runs inside the case worker.  Walks nested tuples, lists, dicts, dataclasses
and plain objects down to tensors and scalars, compares tensors with
dtype-aware tolerances and reports the largest absolute error.  It must not
run models or decide anything but "same within tolerance or not".
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch

#: (rtol, atol) per floating dtype; the default applies to float32 and others.
DEFAULT_TOL = (1e-4, 1e-4)
LOW_PRECISION_TOL = (1e-2, 1e-2)


@dataclasses.dataclass
class Comparison:
    same: bool
    max_error: float
    detail: str | None = None


def _tol(dtype, rtol, atol):
    if dtype in (torch.float16, torch.bfloat16):
        return max(rtol, LOW_PRECISION_TOL[0]), max(atol, LOW_PRECISION_TOL[1])
    return rtol, atol


def _leaves(obj: Any, path: str, out: list, depth: int = 0) -> None:
    if depth > 50:
        out.append((path, "<too deep>"))
        return
    if isinstance(obj, torch.Tensor):
        out.append((path, obj))
    elif isinstance(obj, (list, tuple)):
        out.append((path + "#type", "list" if isinstance(obj, list) else "tuple"))
        out.append((path + "#len", len(obj)))
        for i, v in enumerate(obj):
            _leaves(v, f"{path}[{i}]", out, depth + 1)
    elif isinstance(obj, dict):
        out.append((path + "#keys", sorted(map(str, obj.keys()))))
        for k in obj:
            _leaves(obj[k], f"{path}[{k!r}]", out, depth + 1)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            _leaves(getattr(obj, f.name), f"{path}.{f.name}", out, depth + 1)
    elif obj is None or isinstance(obj, (bool, int, float, complex, str, bytes)):
        out.append((path, obj))
    elif isinstance(obj, (torch.Size, torch.dtype, torch.device)):
        out.append((path, str(obj)))
    elif hasattr(obj, "__dict__") and not callable(obj):
        _leaves(vars(obj), path + ".__dict__", out, depth + 1)
    else:
        out.append((path, f"<{type(obj).__name__}>"))


def _tensor_err(a: torch.Tensor, b: torch.Tensor) -> float:
    if a.is_sparse:
        a = a.to_dense()
    if b.is_sparse:
        b = b.to_dense()
    a, b = a.detach().cpu(), b.detach().cpu()
    if a.is_complex():
        a, b = torch.view_as_real(a), torch.view_as_real(b)
    if not a.dtype.is_floating_point:
        return 0.0 if torch.equal(a, b) else float((a.to(torch.float64) - b.to(torch.float64)).abs().max())
    a64, b64 = a.to(torch.float64), b.to(torch.float64)
    both_nan = torch.isnan(a64) & torch.isnan(b64)
    same_inf = torch.isinf(a64) & (a64 == b64)
    diff = (a64 - b64).abs()
    diff = torch.where(both_nan | same_inf, torch.zeros_like(diff), diff)
    if diff.numel() == 0:
        return 0.0
    m = float(diff.max())
    return math.inf if math.isnan(m) else m


def compare(actual: Any, expected: Any, rtol: float = DEFAULT_TOL[0],
            atol: float = DEFAULT_TOL[1]) -> Comparison:
    """Compare ``actual`` (captured) against ``expected`` (eager)."""
    la: list = []
    le: list = []
    _leaves(actual, "out", la)
    _leaves(expected, "out", le)
    if [p for p, _ in la] != [p for p, _ in le]:
        return Comparison(False, math.inf, "output structure differs")
    worst = 0.0
    detail = None
    same = True
    for (path, a), (_, e) in zip(la, le):
        if isinstance(e, torch.Tensor) or isinstance(a, torch.Tensor):
            if not (isinstance(e, torch.Tensor) and isinstance(a, torch.Tensor)):
                return Comparison(False, math.inf, f"{path}: tensor vs non-tensor")
            if a.shape != e.shape:
                return Comparison(False, math.inf, f"{path}: shape {list(a.shape)} vs {list(e.shape)}")
            if a.dtype != e.dtype:
                return Comparison(False, math.inf, f"{path}: dtype {a.dtype} vs {e.dtype}")
            err = _tensor_err(a, e)
            worst = max(worst, err)
            if e.dtype.is_floating_point or e.is_complex():
                r, t = _tol(e.dtype, rtol, atol)
                ee = e.detach().cpu()
                aa = a.detach().cpu()
                if ee.is_sparse:
                    ee, aa = ee.to_dense(), aa.to_dense()
                if not torch.allclose(aa, ee, rtol=r, atol=t, equal_nan=True):
                    same = False
                    detail = detail or f"{path}: max abs error {err:.3g}"
            elif err != 0.0:
                same = False
                detail = detail or f"{path}: integer values differ"
        elif isinstance(e, float) and isinstance(a, float):
            if not (a == e or (math.isnan(a) and math.isnan(e)) or
                    math.isclose(a, e, rel_tol=rtol, abs_tol=atol)):
                same = False
                detail = detail or f"{path}: {a!r} vs {e!r}"
            if math.isfinite(a) and math.isfinite(e):
                worst = max(worst, abs(a - e))
        elif a != e:
            return Comparison(False, math.inf, f"{path}: {str(a)[:60]} vs {str(e)[:60]}")
    return Comparison(same, worst, detail)


def identical(a: Any, b: Any) -> bool:
    """Bitwise-identical outputs (NaNs in the same places count as equal)."""
    c = compare(a, b, rtol=0.0, atol=0.0)
    return c.same and c.max_error == 0.0


def clone_output(obj: Any) -> Any:
    """Detached copy of an output, so later in-place changes do not alter it."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().clone()
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*[clone_output(v) for v in obj])
    if isinstance(obj, (list, tuple)):
        items = [clone_output(v) for v in obj]
        try:
            return type(obj)(items)
        except Exception:  # noqa: BLE001 - exotic sequence types
            return items if isinstance(obj, list) else tuple(items)
    if isinstance(obj, dict):
        try:
            new = type(obj)()
        except Exception:  # noqa: BLE001
            new = {}
        for k, v in obj.items():
            new[k] = clone_output(v)
        return new
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        try:
            return dataclasses.replace(obj, **{f.name: clone_output(getattr(obj, f.name))
                                               for f in dataclasses.fields(obj) if f.init})
        except Exception:  # noqa: BLE001
            return obj
    return obj
