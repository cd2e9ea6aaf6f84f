"""The engines a fuzz program runs under: eager (the reference), dynacap, torch's Dynamo.

An engine wraps the program's entry point, is reset before each program, and
says which source directories count as its own internals (an exception whose
deepest user-or-engine frame lies there is an ``internal_error``, not a
``wrong_exception``) and which warning text marks an internal error.
``counts()`` says how many graphs the engine compiled and how many graph
breaks it met since the last ``wrap`` (dynacap: the capture's own record, as
``dynacap.explain`` keeps it; Dynamo: a counting backend and its
``graph_break`` counters), for the breaks-per-program figures.
Dynamo is imported only when its engine is used (it is the peer measured
against, never part of dynacap).
"""
from __future__ import annotations

import os


class Engine:
    """Eager: runs the function as is.  Subclasses override ``wrap``/``reset``."""

    name = "eager"
    internal_dirs: tuple[str, ...] = ()
    internal_warning: str | None = None

    def wrap(self, fn):
        return fn

    def reset(self) -> None:
        pass

    def counts(self) -> tuple[int, int, list[str]] | None:
        """(graphs compiled, graph breaks, break reasons) since ``wrap``; None for eager."""
        return None


def short_reason(text: str) -> str:
    """A break reason's first line, cut short, with the program's names and numbers kept (for tallies)."""
    return " ".join(str(text).split("\n")[0].split())[:110]


class DynacapEngine(Engine):
    name = "dynacap"
    internal_warning = "dynacap: internal error"

    def __init__(self, backend: str = "eager", reorder_prints: bool = False):
        import dynacap

        self.dynacap = dynacap
        self.backend = backend
        self.internal_dirs = (os.path.dirname(os.path.abspath(dynacap.__file__)) + os.sep,)
        self.logging = {print} if reorder_prints else set()
        if reorder_prints:
            self.name = "dynacap+print"

    def wrap(self, fn):
        """``optimize(fn, backend=...)``'s capture, on a context of its own whose record counts this program."""
        from dynacap import hook
        from dynacap.backends import configured
        from dynacap.capture import CaptureContext, CaptureRecord

        # Set for the program about to run (a child may run programs for several engines in turn).
        self.dynacap.config.reorderable_logging_functions = set(self.logging)
        self.record = CaptureRecord()
        ctx = CaptureContext(configured(self.backend), record=self.record)

        def captured(*args, **kwargs):
            return hook.call_with_callback(ctx.callback, fn, *args, **kwargs)
        return captured

    def reset(self) -> None:
        self.dynacap.reset()

    def counts(self):
        record = self.record
        return len(record.graphs), len(record.break_reasons), [short_reason(r.reason) for r in record.break_reasons]


class DynamoEngine(Engine):
    name = "dynamo"

    def __init__(self, backend: str = "eager"):
        import torch
        import torch._dynamo

        self.torch = torch
        self.backend = backend
        torch_dir = os.path.dirname(os.path.abspath(torch.__file__))
        self.internal_dirs = tuple(os.path.join(torch_dir, d) + os.sep for d in ("_dynamo", "_functorch"))

    def wrap(self, fn):
        from torch._dynamo.backends.registry import lookup_backend

        inner = lookup_backend(self.backend)
        self.graphs = 0

        def counting(gm, example_inputs):
            self.graphs += 1
            return inner(gm, example_inputs)
        self.torch._dynamo.utils.counters.clear()
        return self.torch.compile(fn, backend=counting)

    def reset(self) -> None:
        self.torch._dynamo.reset()

    def counts(self):
        breaks = self.torch._dynamo.utils.counters["graph_break"]
        reasons = [short_reason(r) for r, n in breaks.items() for _ in range(n)]
        return self.graphs, len(reasons), reasons


def make_engine(spec: str) -> Engine:
    """``"dynacap"``, ``"dynacap:aot_eager"``, ``"dynacap+print"`` (``print`` replayed after the graph:
    ``config.reorderable_logging_functions``), ``"dynamo"``, ``"dynamo:aot_eager"``, ``"eager"``, or
    ``"py:module:Class"`` (an ``Engine`` subclass importable in a child, for tests of the fuzzer)."""
    if spec.startswith("py:"):
        import importlib

        _, module, attr = spec.split(":")
        return getattr(importlib.import_module(module), attr)()
    name, _, backend = spec.partition(":")
    if name == "eager":
        return Engine()
    if name in ("dynacap", "dynacap+print"):
        return DynacapEngine(backend or "eager", reorder_prints=name == "dynacap+print")
    if name == "dynamo":
        return DynamoEngine(backend or "eager")
    raise ValueError(f"unknown engine {spec!r} (eager, dynacap[:backend], dynamo[:backend])")
