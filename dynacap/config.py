"""Settings of the capture engine, read at capture time.

Use ``dynacap.config.patch(name=value)`` as a context manager or decorator
for temporary changes.  This module holds values only: no logic that reads
frames or graphs lives here.
"""
from __future__ import annotations

import contextlib
import sys

#: Cache entries (guarded compiled versions) kept per code object and capture
#: context (backend, ``fullgraph``, ``dynamic``); past this, dynacap warns once
#: and that context runs the code eagerly (other contexts keep capturing it).
cache_size_limit: int = 8

#: When True, internal errors in capture fall back to eager with a warning;
#: when False they are raised to the caller.
suppress_errors: bool = True

#: How many nested user-function calls are inlined into one graph.
inline_depth_limit: int = 32

#: Largest number of loop iterations unrolled in one frame before giving up.
max_unroll: int = 4096

#: Most bytecode instructions interpreted in one capture (the frame and every call inlined into it): a
#: bound on capture time.  HuggingFace models read their configs through Python (``to_dict()``, a
#: ``__getattribute__`` per read): a tiny T5 needs about 80,000.
max_instructions: int = 1_000_000

#: Logging functions whose calls are replayed after the graph instead of breaking it, when every argument's
#: text is known at capture time (as torch.compile's setting of the same name); only ``print`` is
#: supported: ``config.patch(reorderable_logging_functions={print})``.  The text then appears after the
#: graph's work: a warning the graph emits comes first, and a crash inside the graph loses it.
reorderable_logging_functions: set = set()

#: Path prefixes whose code is never captured (besides dynacap and the stdlib,
#: which are always skipped).  Extend to skip a library.
skip_prefixes: list[str] = []

#: When True, ``backward()`` calls made inside an optimized function or module run as compiled whole-backward
#: graphs (``dynacap.compiled_autograd``), compiled by that ``optimize`` call's backend.
compiled_autograd: bool = False

#: When True, every instance of an ``nn.Module`` class shares one graph: a module reached from
#: the frame is guarded by its type and structure (parameter, buffer and child names, no hooks)
#: and its parameters and buffers are graph inputs.  When False, each instance gets its own
#: graphs (guarded by identity, parameters held by the graph).
share_graphs_across_instances: bool = True

#: When True, ``t.item()`` (and ``int(t)``, ``float(t)``, ``t.tolist()``) stays in the graph as a
#: data-dependent symbol (torch's *unbacked* ``SymInt``/``SymFloat``) that later operations use;
#: Python code that needs its value (``if t.item() > 0:``) is a graph break.  When False (the
#: default, as torch.compile's setting of the same name), reading a tensor's value is a break.
capture_scalar_outputs: bool = False

#: When True, operations whose result size depends on the data (``nonzero``, ``x[mask]``,
#: ``torch.unique``, ``masked_select``) stay in the graph with data-dependent sizes; when False
#: (the default, as torch.compile's setting of the same name) they are graph breaks.
capture_dynamic_output_shape_ops: bool = False

_SETTINGS = (
    "cache_size_limit",
    "suppress_errors",
    "inline_depth_limit",
    "max_unroll",
    "max_instructions",
    "reorderable_logging_functions",
    "skip_prefixes",
    "compiled_autograd",
    "share_graphs_across_instances",
    "capture_scalar_outputs",
    "capture_dynamic_output_shape_ops",
)


class _Patch(contextlib.ContextDecorator):
    def __init__(self, settings: dict):
        unknown = set(settings) - set(_SETTINGS)
        if unknown:
            raise AttributeError(f"dynacap.config has no setting(s) {sorted(unknown)}; known: {list(_SETTINGS)}")
        self.settings = settings
        self.saved: list[dict] = []

    def __enter__(self):
        module = sys.modules[__name__]
        self.saved.append({k: getattr(module, k) for k in self.settings})
        for k, v in self.settings.items():
            setattr(module, k, v)
        return self

    def __exit__(self, *exc):
        module = sys.modules[__name__]
        for k, v in self.saved.pop().items():
            setattr(module, k, v)
        return False


def patch(**settings) -> _Patch:
    """Temporarily change settings: ``with config.patch(cache_size_limit=2): ...`` or as a decorator."""
    return _Patch(settings)


def settings() -> dict:
    module = sys.modules[__name__]
    return {k: getattr(module, k) for k in _SETTINGS}


