"""Save and restore torch's global modes, and hold Ctrl-C, around a capture.

A capture changes thread state while it runs (fake mode, grad mode,
autocast) and calls torch code from C++ that cannot take an exception (a
Ctrl-C raised there aborts the process).  ``TorchState`` records every mode
when a capture starts and puts back whatever differs however it ends;
``DeferredInterrupts`` holds Ctrl-C until a safe point; and
``restoring_modes_on_error`` makes a compiled graph with grad-mode/autocast
switch nodes leave both modes as it found them if it raises midway, as an
eager ``with`` block would, and one with random nodes put back the random
generators it draws from (so that its frame's eager rerun draws what eager
draws).

This module must not trace or compile anything: it only reads and sets
torch's thread-local modes and the SIGINT handler.
"""
from __future__ import annotations

import contextlib
import signal
import threading
import warnings

import torch


class TorchState:
    """The thread's torch modes when a capture starts; ``restore`` puts back whatever differs.

    Grad mode, autocast (per device, dtype, cache, nesting), the fake/proxy/
    functional dispatch modes, the dispatch and function mode stacks and the
    flags torch keeps beside them.  Restored after every capture, including
    one that raised anything (``KeyboardInterrupt`` too), so eager torch code
    afterwards never runs under a mode a capture entered.
    """

    _INFRA_KEYS = tuple(torch._C._TorchDispatchModeKey.__members__.values())

    def __init__(self):
        from torch.utils import _python_dispatch

        self.grad = torch.is_grad_enabled()
        self.autocast = autocast_state()
        self.infra = [(key, torch._C._get_dispatch_mode(key)) for key in self._INFRA_KEYS]
        self.dispatch_stack = torch._C._len_torch_dispatch_stack() - _infra_modes_set()
        self.function_stack = torch._C._len_torch_function_stack()
        self.only_lift_cpu = torch._C._only_lift_cpu_tensors()
        self.dispatch_flags = (_python_dispatch._is_in_torch_dispatch_mode,
                               _python_dispatch._is_in_non_infra_torch_dispatch_mode,
                               _python_dispatch._is_in_any_mode_without_ignore_compile_internals)

    def restore(self) -> None:
        from torch.utils import _python_dispatch

        for key, mode in self.infra:
            if torch._C._get_dispatch_mode(key) is not mode:
                torch._C._unset_dispatch_mode(key)
                if mode is not None:
                    torch._C._set_dispatch_mode(mode)
        while torch._C._len_torch_dispatch_stack() - _infra_modes_set() > self.dispatch_stack:
            torch._C._pop_torch_dispatch_stack(None)
        while torch._C._len_torch_function_stack() > self.function_stack:
            torch._C._pop_torch_function_stack()
        if torch._C._only_lift_cpu_tensors() != self.only_lift_cpu:
            torch._C._set_only_lift_cpu_tensors(self.only_lift_cpu)
        flags = (_python_dispatch._is_in_torch_dispatch_mode,
                 _python_dispatch._is_in_non_infra_torch_dispatch_mode,
                 _python_dispatch._is_in_any_mode_without_ignore_compile_internals)
        if flags != self.dispatch_flags:
            (_python_dispatch._is_in_torch_dispatch_mode,
             _python_dispatch._is_in_non_infra_torch_dispatch_mode,
             _python_dispatch._is_in_any_mode_without_ignore_compile_internals) = self.dispatch_flags
            _python_dispatch.set_is_in_mode_without_ignore_compile_internals(self.dispatch_flags[2])
        restore_autocast(self.autocast)
        if torch.is_grad_enabled() != self.grad:
            torch._C._set_grad_enabled(self.grad)


def _infra_modes_set() -> int:
    return sum(torch._C._get_dispatch_mode(key) is not None for key in TorchState._INFRA_KEYS)


_AUTOCAST_DEVICES = ("cpu", "cuda")


def autocast_state() -> tuple:
    """Autocast per device (enabled, dtype), its cache flag and nesting depth."""
    devices = tuple((d, torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in _AUTOCAST_DEVICES)
    torch.autocast_increment_nesting()
    return devices, torch.is_autocast_cache_enabled(), torch.autocast_decrement_nesting()


def restore_autocast(saved: tuple) -> None:
    devices, cache_enabled, depth = saved
    for device, enabled, dtype in devices:
        if torch.is_autocast_enabled(device) != enabled:
            torch.set_autocast_enabled(device, enabled)
        if torch.get_autocast_dtype(device) != dtype:
            torch.set_autocast_dtype(device, dtype)
    if torch.is_autocast_cache_enabled() != cache_enabled:
        torch.set_autocast_cache_enabled(cache_enabled)
    torch.autocast_increment_nesting()
    nesting = torch.autocast_decrement_nesting()
    if nesting != depth:
        while nesting > depth:
            nesting = torch.autocast_decrement_nesting()
        while nesting < depth:
            nesting = torch.autocast_increment_nesting()
        if nesting == 0:
            torch.clear_autocast_cache()  # what leaving the outermost autocast block does


class DeferredInterrupts:
    """Holds Ctrl-C (SIGINT) while a capture runs and raises it at a safe point.

    Python runs a signal handler at whatever bytecode is running, and much of
    a capture runs inside torch code called from C++ (fake propagation,
    meta tensors, autograd metadata) where a ``KeyboardInterrupt`` makes the
    C++ side call ``std::terminate``, or inside weakref callbacks, where it is
    printed and lost.  While a capture runs on the main thread (the only one
    Python delivers signals to), SIGINT only marks the interrupt pending; the
    previous handler (usually ``default_int_handler``, which raises
    ``KeyboardInterrupt``) is called before the next graph operation, when
    the capture ends, or before the backend compiles (which is left
    interruptible: it may take minutes).  Nested use is counted.
    """

    def __init__(self):
        self.previous = None  # the handler replaced while holding
        self.pending = None   # (signum, frame) of a held SIGINT
        self.depth = 0

    @staticmethod
    def _on_main_thread() -> bool:
        return threading.current_thread() is threading.main_thread()

    @property
    def holding(self) -> bool:
        return self.previous is not None and self._on_main_thread()

    def hold(self, signum, frame) -> None:
        self.pending = (signum, frame)

    def deliver(self) -> None:
        """Run the previous handler for a held SIGINT (it raises ``KeyboardInterrupt``)."""
        if self.pending is not None:
            signum, frame = self.pending
            self.pending = None
            self.previous(signum, frame)

    def safe_point(self):
        """What to call at safe points of this thread's capture; None when nothing is held here."""
        return self.deliver if self.holding else None

    def __enter__(self):
        if self._on_main_thread():
            if self.depth == 0:
                previous = signal.getsignal(signal.SIGINT)
                if callable(previous):  # SIG_DFL, SIG_IGN, None: no Python handler to defer
                    self.previous = previous
                    signal.signal(signal.SIGINT, self.hold)
            self.depth += 1
        return self

    def __exit__(self, *exc) -> bool:
        if self._on_main_thread():
            self.depth -= 1
            if self.depth == 0 and self.previous is not None:
                signal.signal(signal.SIGINT, self.previous)
                try:
                    self.deliver()
                finally:
                    self.previous = None
        return False

    @contextlib.contextmanager
    def released(self):
        """Let SIGINT through for the duration of the block (a held one is delivered first)."""
        if not self.holding:
            yield
            return
        self.deliver()
        signal.signal(signal.SIGINT, self.previous)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, self.hold)


#: Only the main thread's captures hold interrupts, so one instance serves the process.
interrupts = DeferredInterrupts()


def restoring_modes_on_error(compiled, gm: torch.fx.GraphModule):
    """A graph that switches grad mode or autocast, or draws random numbers, undoes that if it raises midway.

    Eager ``with torch.no_grad()`` / ``torch.autocast`` blocks leave on any
    exception (a ``KeyboardInterrupt`` while the graph runs included); the
    graph's switch nodes would not, so the modes at the graph's start are put
    back.  A graph that is rerun eagerly if it raises (``codegen.rewrite``: it
    mutates nothing) puts the default generators its random nodes draw from
    back to their state at its start, so that the rerun draws what eager
    draws (``graph.effects``).  Graphs
    without such nodes are returned as they are (no cost).
    """
    from torch.amp import autocast_mode

    from .graph.effects import graph_may_mutate, random_devices

    targets = {n.target for n in gm.graph.nodes if n.op == "call_function"}
    switches_grad = torch._C._set_grad_enabled in targets
    switches_autocast = autocast_mode._enter_autocast in targets
    # A graph that may mutate is never rerun: its random draws stand, as eager's would.
    devices = set() if graph_may_mutate(gm.graph) else random_devices(gm.graph)
    generators = [_default_generator(device) for device in devices]
    if not (switches_grad or switches_autocast or generators):
        return compiled

    def run_graph(*args):
        grad = torch.is_grad_enabled()
        autocast = autocast_state() if switches_autocast else None
        rng = [g.get_state() for g in generators]
        try:
            return compiled(*args)
        except BaseException:
            if autocast is not None:
                restore_autocast(autocast)
            torch._C._set_grad_enabled(grad)
            for generator, state in zip(generators, rng):
                generator.set_state(state)
            raise

    run_graph.compiled = compiled
    return run_graph


def _default_generator(device: torch.device):
    if device.type == "cuda":
        return torch.cuda.default_generators[torch.cuda.current_device() if device.index is None else device.index]
    return torch.default_generator


#: ``warnings._filters_mutated`` as the module has it, and how many captures (of any thread) hold it off now.
_FILTERS_MUTATED = warnings._filters_mutated
_registries_held = 0
_registries_lock = threading.Lock()


def _filters_not_mutated() -> None:
    """What ``warnings._filters_mutated`` is while a capture runs: the registries stay valid."""


@contextlib.contextmanager
def preserving_warning_registries():
    """Warning filters changed and restored inside a capture (AOTAutograd's and inductor's
    ``catch_warnings``) leave the modules' ``__warningregistry__`` as they were.

    CPython clears every registry on any filter change, so a warning eager shows once was shown again
    after each compile.  A net change of the filters over the capture still clears them.  Captures in
    two threads may end in any order: the last one out puts the module's function back (saving and
    restoring it per capture left it off for good, and later filter changes then never cleared the
    registries: a warning eager shows was not shown).
    """
    global _registries_held
    filters, before = warnings.filters, list(warnings.filters)
    with _registries_lock:
        _registries_held += 1
        warnings._filters_mutated = _filters_not_mutated  # catch_warnings and _add_filter look it up on the module
    try:
        yield
    finally:
        with _registries_lock:
            _registries_held -= 1
            if _registries_held == 0:
                warnings._filters_mutated = _FILTERS_MUTATED
        if warnings.filters is not filters or warnings.filters != before:
            _FILTERS_MUTATED()
