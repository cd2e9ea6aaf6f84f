"""Case model of the corpus harness: what one case is, its statuses, JSON form.

A *case* is one callable to test: an ``nn.Module`` subclass found in a project
checkout (or named by a manifest), or a plain function named by a manifest.
This module only describes cases; it must not import user code, torch, or
anything heavy (it is imported by the parent process and by Dask clients).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

OK = "ok"
WRONG_RESULT = "wrong_result"
COMPILE_ERROR = "compile_error"
EAGER_ERROR = "eager_error"
IMPORT_ERROR = "import_error"
TIMEOUT = "timeout"
CRASH = "crash"
NONDETERMINISTIC = "nondeterministic"

#: Every status a compiler result can have, in report order.
STATUSES = (OK, WRONG_RESULT, COMPILE_ERROR, EAGER_ERROR, IMPORT_ERROR,
            TIMEOUT, CRASH, NONDETERMINISTIC)
#: Statuses decided before any compiler runs (shared by all compilers of a case).
CASE_LEVEL = (EAGER_ERROR, IMPORT_ERROR, NONDETERMINISTIC)

COMPILERS = ("dynacap", "dynamo")


@dataclass
class Case:
    """One callable to capture.

    ``init_args``/``init_kwargs``/``args``/``kwargs`` are value *specs* (see
    :mod:`dynacap.harness.values`); ``None`` means "infer".  ``data`` names a
    ``torch.save`` file holding a dict with any of those four keys as real
    objects (used by generated manifests whose inputs are not JSON-able).
    """

    id: str
    project: str
    root: str
    qualname: str
    kind: str = "module"            # "module" | "function"
    file: str | None = None         # relative to root
    module: str | None = None       # dotted name, instead of file
    init_args: list | None = None
    init_kwargs: dict | None = None
    args: list | None = None
    kwargs: dict | None = None
    data: str | None = None         # absolute path to a .pt file
    timeout: float | None = None    # per-case override of --timeout
    source: str = "discovered"      # "discovered" | "manifest"
    expect: str | None = None       # informational expected status (manifests)
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Case":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


def jsonable(obj: Any) -> Any:
    """Make ``obj`` strict-JSON safe (non-finite floats become strings)."""
    if isinstance(obj, float):
        if math.isfinite(obj):
            return obj
        return "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if obj is None or isinstance(obj, (str, int, bool)):
        return obj
    return repr(obj)


def as_float(v: Any) -> float | None:
    """Read back a number written by :func:`jsonable`."""
    if v is None:
        return None
    if isinstance(v, (int, float)):
        return float(v)
    try:
        return float(v)
    except (TypeError, ValueError):
        return None
