"""The engines a fuzz program runs under: eager (the reference), dynacap, torch's Dynamo.

An engine wraps the program's entry point, is reset before each program, and
says which source directories count as its own internals (an exception whose
deepest user-or-engine frame lies there is an ``internal_error``, not a
``wrong_exception``) and which warning text marks an internal error.
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


class DynacapEngine(Engine):
    name = "dynacap"
    internal_warning = "dynacap: internal error"

    def __init__(self, backend: str = "eager"):
        import dynacap

        self.dynacap = dynacap
        self.backend = backend
        self.internal_dirs = (os.path.dirname(os.path.abspath(dynacap.__file__)) + os.sep,)

    def wrap(self, fn):
        return self.dynacap.optimize(fn, backend=self.backend)

    def reset(self) -> None:
        self.dynacap.reset()


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
        return self.torch.compile(fn, backend=self.backend)

    def reset(self) -> None:
        self.torch._dynamo.reset()


def make_engine(spec: str) -> Engine:
    """``"dynacap"``, ``"dynacap:aot_eager"``, ``"dynamo"``, ``"dynamo:aot_eager"``, ``"eager"``, or
    ``"py:module:Class"`` (an ``Engine`` subclass importable in a child, for tests of the fuzzer)."""
    if spec.startswith("py:"):
        import importlib

        _, module, attr = spec.split(":")
        return getattr(importlib.import_module(module), attr)()
    name, _, backend = spec.partition(":")
    if name == "eager":
        return Engine()
    if name == "dynacap":
        return DynacapEngine(backend or "eager")
    if name == "dynamo":
        return DynamoEngine(backend or "eager")
    raise ValueError(f"unknown engine {spec!r} (eager, dynacap[:backend], dynamo[:backend])")
