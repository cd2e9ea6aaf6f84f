"""Compiled autograd: each ``backward()`` runs one captured graph of the whole backward, compiled by a backend.

    with dynacap.compiled_autograd.enable("aot_eager") as stats:
        loss.backward()

(or ``dynacap.config.compiled_autograd = True``: optimized calls then run
their backwards this way, with the ``optimize`` call's backend).  The
capture happens when the backward runs, so it sees the whole backward
whatever graph breaks the forward had, and hooks registered in between.
torch's autograd engine walks the graph and lifts tensors, sizes and hooks;
``autograd/capture.py`` records the graph; ``autograd/program.py`` runs it.
The engine caches one program per graph structure (node types, sizes that
stay the same), so the second backward of the same structure reuses it; the
program compiles its pure stretches once per backend (that of the
innermost ``enable`` block it runs in).

Exact or eager: hooks run at run time on every backward in the engine's
order, and what cannot be captured faithfully runs on the eager engine with
a reason logged on ``dynacap.compiled_autograd`` and kept in
``stats.fallbacks``: ``create_graph=True``, batched grads, user saved-tensor
hooks, reentrant checkpointing, anomaly detection, and a backward started
while another runs.

torch's own compiled autograd (torch.compile's ``compiled_autograd`` setting)
shares the engine: its cached programs answer in ``enable`` blocks until
``reset()``, and node types it met first in the process run eagerly here.

This is the one engine module that uses the autograd engine's C++ entry
point ``torch._C._dynamo.compiled_autograd`` (the written exception to the
no-Dynamo rule), driven by dynacap's own compiler class; nothing of Dynamo's
Python is used.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import threading
from dataclasses import dataclass, field

import torch

from . import hook
from .backends import lookup_backend

#: The autograd engine's compiled-autograd entry point (C++).
_engine = torch._C._dynamo.compiled_autograd

log = logging.getLogger("dynacap.compiled_autograd")


@dataclass
class Stats:
    """What one ``enable`` block did: captures (one per new backward structure), graphs, eager fallbacks."""

    backend: object = None
    captures: int = 0
    backward_graphs: list = field(default_factory=list)  # the whole-backward graphs as captured
    graphs: list = field(default_factory=list)  # the ATen graphs handed to the backend
    fallbacks: list[str] = field(default_factory=list)


class _State(threading.local):
    def __init__(self):
        self.running = 0  # compiled backwards running on this thread (a nested one runs eagerly)


_state = _State()
_active: list[Stats] = []  # the enable blocks entered, innermost last (the engine's compiler is process-wide)


def _current():
    """The innermost ``enable`` block's (backend, stats): what a cached program compiles its segments with."""
    return (_active[-1].backend, _active[-1]) if _active else None


@contextlib.contextmanager
def enable(backend="inductor"):
    """Run every ``backward()`` / ``autograd.grad`` in the block as a compiled whole-backward graph.

    ``backend`` is a dynacap backend (name or callable); yields a ``Stats``.
    """
    from .autograd.capture import BackwardCapture
    from .autograd.program import BackwardProgram

    compiler = lookup_backend(backend)
    stats = Stats(backend=compiler)

    def make_program(gm):
        stats.captures += 1
        stats.backward_graphs.append(gm)
        return BackwardProgram(gm, compiler, stats, _current)

    prior = _engine.set_autograd_compiler(functools.partial(BackwardCapture, make_program, _engine), False)
    _active.append(stats)
    _patch_entry_points()
    try:
        with torch.autograd.set_multithreading_enabled(False):
            yield stats
    finally:
        _active.pop()
        _engine.set_autograd_compiler(*prior)
        if not _active:
            _restore_entry_points()


def reset() -> None:
    """Forget every captured backward program (the engine's cache, shared with torch's compiled autograd)."""
    _engine.clear_cache()


@contextlib.contextmanager
def _eager_engine():
    prior = _engine.set_autograd_compiler(None, False)
    try:
        yield
    finally:
        _engine.set_autograd_compiler(*prior)


def _fall_back(reason: str) -> None:
    log.info("dynacap: this backward runs on the eager autograd engine: %s", reason)
    if _active:
        _active[-1].fallbacks.append(reason)


def _eager_reason(bound: inspect.BoundArguments) -> str | None:
    """Why a backward must run eagerly, judged from its call alone (before the engine starts)."""
    if _state.running:
        return "a backward started while another backward runs (reentrant checkpointing, a hook calling backward)"
    if bound.arguments.get("create_graph"):
        return "create_graph=True (a differentiable backward) is not captured"
    if bound.arguments.get("is_grads_batched"):
        return "is_grads_batched=True (vmap over grad_outputs) is not captured"
    return None


def _guarded(original):
    """``torch.autograd.backward``/``grad`` that fall back to the eager engine where capture is not exact."""
    signature = inspect.signature(original)

    @functools.wraps(original)
    def entry(*args, **kwargs):
        from .autograd.capture import Unsupported, close_unfinished

        if not _active:
            return original(*args, **kwargs)
        reason = _eager_reason(signature.bind(*args, **kwargs))
        if reason is not None:
            _fall_back(reason)
            with _eager_engine():
                return original(*args, **kwargs)
        _state.running += 1
        try:
            # Without the frame callback: capture runs torch's and sympy's Python, the program runs hooks;
            # none of it is the user's program to capture.
            return hook.call_with_callback(None, original, *args, **kwargs)
        except Unsupported as e:
            # Raised while capturing, before any formula or hook ran: the graph is intact.
            reason = str(e)
        finally:
            _state.running -= 1
            close_unfinished()
        _fall_back(reason)
        with _eager_engine():
            return original(*args, **kwargs)

    entry._dynacap_original = original
    return entry


def _patch_entry_points():
    if not hasattr(torch.autograd.backward, "_dynacap_original"):
        torch.autograd.backward = _guarded(torch.autograd.backward)
        torch.autograd.grad = _guarded(torch.autograd.grad)


def _restore_entry_points():
    for name in ("backward", "grad"):
        fn = getattr(torch.autograd, name)
        setattr(torch.autograd, name, getattr(fn, "_dynacap_original", fn))
