"""The frame callback: decide, trace, compile and build a cache entry for one frame.

The C hook calls ``CaptureContext.on_frame`` on a cache miss.  It skips
code dynacap must not capture, enforces the cache size limit, runs the
symbolic interpreter, hands the graph to the backend, generates the
rewritten code, compiles the guards, and returns ``(guard, code)`` for the
hook to cache and run.  On a graph break the frame runs eagerly; on an
internal error too (unless ``config.suppress_errors`` is False).  This is
the only module that ties the pipeline stages together.

A capture changes thread state while it runs (fake mode, grad mode,
autocast) and calls torch code from C++ that cannot take an exception
(a Ctrl-C raised there aborts the process), so it holds Ctrl-C until a safe
point (``DeferredInterrupts``) and puts every mode back however it ends
(``TorchState``); an interrupted capture leaves no entry and no mark, so the
frame is captured again on its next call.
"""
from __future__ import annotations

import contextlib
import dis
import logging
import signal
import threading
import time
import types
import warnings
import weakref
from dataclasses import dataclass, field

from . import _C, config, hook, logs
import torch

from .codegen import resume
from .codegen.breaks import BreakCodegen, plan_levels
from .codegen.emitter import Emitter
from .codegen.rewrite import build_rewritten_code, emit_side_effects
from .errors import BackendError, BreakReason, GraphBreak, Unsupported
from .guards import compile_guards
from .interpreter import TraceContext, Tracer
from .interpreter.skipfiles import is_skipped_file

_warned_cache_limit: set = set()

#: The shared contexts of ``CaptureContext.shared``, by (backend identity, fullgraph, dynamic).  A context
#: lives while a wrapper or a cache entry (which holds its callback) refers to it.
_shared_contexts: weakref.WeakValueDictionary = weakref.WeakValueDictionary()

#: id(code) -> (weak reference to the code, callbacks of the contexts that run it eagerly from now on:
#: cache limit reached, internal error).  Per context: another backend or option may still capture the
#: code.  By identity, as code objects compare equal by value.  Cleared by ``reset``.
_run_eagerly: dict[int, tuple] = {}


def reset() -> None:
    """Forget the cache-limit warnings and per-context eager marks (the hook's entries are dropped apart)."""
    _warned_cache_limit.clear()
    _run_eagerly.clear()


@dataclass
class CaptureRecord:
    """What capture did, for ``explain``: graphs, breaks, guards, timings."""

    graphs: list = field(default_factory=list)
    break_reasons: list[BreakReason] = field(default_factory=list)
    guards: list[str] = field(default_factory=list)
    compile_times: list[float] = field(default_factory=list)
    frames: int = 0


class CaptureContext:
    """A backend and the options that change what capture produces; its ``callback`` is the hook's callback.

    The hook uses a cache entry only while the callback that made it is the
    thread's callback, so entries are keyed by context: frames reached from an
    optimized call (callees, resume functions) share its entries, another
    backend or option never does.  ``optimize`` takes its context from
    ``shared`` so that wrappers with the same key share entries; a context
    made directly (``explain``) has its own.
    """

    def __init__(self, backend, fullgraph: bool = False, dynamic=None, record: CaptureRecord | None = None):
        self.backend = backend
        self.fullgraph = fullgraph
        self.dynamic = dynamic
        self.record = record
        self.callback = self.on_frame

    @classmethod
    def shared(cls, backend, fullgraph: bool = False, dynamic=None) -> "CaptureContext":
        """The one context of (backend identity, fullgraph, dynamic); the key holds the backend alive."""
        fullgraph = bool(fullgraph)
        dynamic = None if dynamic is None else bool(dynamic)
        key = (id(backend), fullgraph, dynamic)
        ctx = _shared_contexts.get(key)
        if ctx is None:
            ctx = _shared_contexts[key] = cls(backend, fullgraph=fullgraph, dynamic=dynamic)
        return ctx

    # -- the callback ---------------------------------------------------------------
    def on_frame(self, code, func, f_locals, f_globals, f_builtins):
        if is_skipped_file(code.co_filename):
            hook.skip(code)  # for every context: library code is never captured
            return None
        marked = _run_eagerly.get(id(code))
        if marked is not None and marked[0]() is code and self.callback in marked[1]:
            return None
        # The limit counts this context's entries: other backends or options do not use up its room.
        entries = [e for e in hook.cache_entries(code) if e[2] is self.callback]
        if entries:
            self._log_recompile(code, entries, f_locals, f_globals)
            if len(entries) >= config.cache_size_limit:
                if code not in _warned_cache_limit:
                    _warned_cache_limit.add(code)
                    warnings.warn(
                        f"dynacap: {code.co_name} ({code.co_filename}:{code.co_firstlineno}) was recompiled "
                        f"config.cache_size_limit={config.cache_size_limit} times; running it eagerly from now on",
                        stacklevel=2,
                    )
                self.run_eagerly(code)
                return None
        state = TorchState()
        try:
            with _interrupts:
                entry = self.capture_frame(code, f_locals, f_globals, f_builtins)
        except Unsupported:
            raise
        except Exception as e:
            if not config.suppress_errors:
                raise
            warnings.warn(f"dynacap: internal error while capturing {code.co_name} "
                          f"({code.co_filename}:{code.co_firstlineno}); running it eagerly: "
                          f"{type(e).__name__}: {e}", stacklevel=2)
            logging.getLogger("dynacap").debug("internal error", exc_info=True)
            self.run_eagerly(code)
            return None
        finally:
            state.restore()
        hook.track(code)
        return entry

    def run_eagerly(self, code) -> None:
        """From now on this context runs ``code`` eagerly (its entries still hit); other contexts are unaffected."""
        key = id(code)
        marked = _run_eagerly.get(key)
        if marked is None or marked[0]() is not code:
            marked = _run_eagerly[key] = (weakref.ref(code, lambda _, key=key: _run_eagerly.pop(key, None)), set())
        marked[1].add(self.callback)

    # -- one frame -----------------------------------------------------------------
    def capture_frame(self, code: types.CodeType, f_locals: dict, f_globals: dict, f_builtins: dict):
        start = time.perf_counter()
        tctx = TraceContext(f_globals, f_builtins, initial_grad=torch.is_grad_enabled())
        tctx.guards.global_state()
        tracer = Tracer(code, tctx, f_globals)
        tracer.frame_values = dict(f_locals)
        tctx.graph.before_op = _interrupts.safe_point()
        try:
            with tctx.graph.propagating():
                return_value = tracer.run()
            new_code = self.finish(code, tctx, return_value)
        except GraphBreak as e:
            reason = e.to_reason()
            logs.get("breaks").debug("graph break: %s", reason)
            root = e.frames[0] if e.frames else None
            repeated = root is not None and resume.is_resume_at(code) and resume.is_entry(code, root.instruction.offset)
            if self.record is not None and not repeated:
                # A resume function made to run a break's instruction meets that same break
                # first: it was reported by the frame that made it.
                self.record.break_reasons.append(reason)
            if self.fullgraph:
                raise Unsupported(reason) from None
            new_code = self.resume_after_break(code, tctx, e) or code
        finally:
            while tctx.autocasts:  # leave autocast blocks the trace entered (a break inside one)
                tctx.autocasts.pop().__exit__(None, None, None)
            torch._C._set_grad_enabled(tctx.initial_grad)
        tctx.guards.distinct_tensors([i.source for i in tctx.graph.inputs])
        guard = compile_guards(tctx.guards, f_builtins)
        self._log_entry(code, new_code, guard)
        if self.record is not None:
            self.record.guards.extend(guard.describe())
            self.record.compile_times.append(time.perf_counter() - start)
            self.record.frames += 1
        # The hook calls the generated function itself (no Python-level __call__ in between).
        return (guard.fn, new_code)

    def resume_after_break(self, code, tctx: TraceContext, e: GraphBreak):
        """Rewritten code that keeps the graph before the break and resumes after it (None: run eagerly)."""
        for level, at in plan_levels(e.frames):
            chain = e.frames[: level + 1]
            checkpoint = chain[-1].checkpoint
            if tctx.mutations != checkpoint.mutations:
                return None
            tctx.rollback(checkpoint.nodes, checkpoint.side_effects)
            close_autocast_blocks(tctx, chain)
            codegen = BreakCodegen(code, chain, tctx.initial_grad, at=at)
            collector = Emitter(collecting=True)
            try:
                emit_side_effects(collector, tctx.side_effects)
                codegen.emit_values(collector)
            except GraphBreak as why:
                logs.get("breaks").debug("cannot resume at depth %d: %s", level, why.reason)
                continue
            if checkpoint.grad_enabled != tctx.initial_grad:
                tctx.graph.set_grad_enabled(tctx.initial_grad)
            graph_call = None
            if tctx.graph.op_count() or collector.needed_tensors:
                graph_call = self.compile_graph(code, tctx, [t.node for t in collector.needed_tensors])
            return codegen.build(tctx.side_effects, graph_call)
        return None

    def finish(self, code, tctx: TraceContext, return_value):
        collector = Emitter(collecting=True)
        emit_side_effects(collector, tctx.side_effects)
        return_value.reconstruct(collector)
        graph_call = None
        if tctx.graph.op_count() or collector.needed_tensors:
            graph_call = self.compile_graph(code, tctx, [t.node for t in collector.needed_tensors])
        return build_rewritten_code(code, return_value, tctx.side_effects, graph_call)

    def compile_graph(self, code, tctx: TraceContext, outputs):
        gm = tctx.graph.finish(outputs)
        if self.record is not None:
            self.record.graphs.append(gm)
        logs.get("graph").debug("captured graph for %s (%s:%s):\n%s", code.co_name, code.co_filename,
                                code.co_firstlineno, gm.graph)
        example_inputs = [i.example for i in tctx.graph.inputs]
        try:
            with _interrupts.released():  # a long compile (inductor) stays interruptible
                compiled = self.backend(gm, example_inputs)
        except Exception as e:
            raise BackendError(f"backend {getattr(self.backend, '__name__', self.backend)!r} failed on the graph "
                               f"of {code.co_name}: {type(e).__name__}: {e}") from e
        compiled = restoring_modes_on_error(run_without_capture(compiled), gm)
        return compiled, tctx.graph.inputs, {node: i for i, node in enumerate(outputs)}

    # -- logs --------------------------------------------------------------------------
    def _log_recompile(self, code, entries, f_locals, f_globals) -> None:
        log = logs.get("recompiles")
        if not log.isEnabledFor(logging.DEBUG):
            return
        for guard, *_ in entries:
            compiled = getattr(guard, "compiled_guard", None)
            failure = compiled.first_failure(f_locals, f_globals) if compiled is not None else None
            log.debug("recompiling %s (%s:%s): guard failed: %s", code.co_name, code.co_filename,
                      code.co_firstlineno, failure)

    def _log_entry(self, code, new_code, guard) -> None:
        glog = logs.get("guards")
        if glog.isEnabledFor(logging.DEBUG):
            glog.debug("guards for %s:\n  %s", code.co_name, "\n  ".join(guard.describe()))
        blog = logs.get("bytecode")
        if blog.isEnabledFor(logging.DEBUG):
            blog.debug("bytecode of %s:\n%s", code.co_name, side_by_side(code, new_code))


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
_interrupts = DeferredInterrupts()


def close_autocast_blocks(tctx: TraceContext, chain) -> None:
    """A graph that stops inside autocast blocks leaves them (innermost first); the resume re-enters."""
    from .values.autocast import AutocastExitValue

    for frame in reversed(chain):
        for value in reversed(frame.checkpoint.stack):
            if isinstance(value, AutocastExitValue) and not getattr(value.enter_node, "_erased", False):
                value.close_in_graph(frame.tracer)


def run_without_capture(compiled):
    """Wrap a compiled graph so frames inside it are never intercepted (and run at full speed).

    A plain ``GraphModule.forward`` (the eager backend) is returned as is: its
    frames are skipped by the hook anyway and the wrapper would cost more.
    """
    if isinstance(getattr(compiled, "__self__", None), torch.fx.GraphModule):
        return compiled

    def run_graph(*args):
        previous = _C.set_callback(None)
        try:
            return compiled(*args)
        finally:
            _C.set_callback(previous)

    run_graph.compiled = compiled
    return run_graph


def restoring_modes_on_error(compiled, gm: torch.fx.GraphModule):
    """A graph that switches grad mode or autocast switches them back if it raises midway.

    Eager ``with torch.no_grad()`` / ``torch.autocast`` blocks leave on any
    exception (a ``KeyboardInterrupt`` while the graph runs included); the
    graph's switch nodes would not, so the modes at the graph's start are put
    back.  Graphs without switch nodes are returned as they are (no cost).
    """
    from torch.amp import autocast_mode

    targets = {n.target for n in gm.graph.nodes if n.op == "call_function"}
    switches_grad = torch._C._set_grad_enabled in targets
    switches_autocast = autocast_mode._enter_autocast in targets
    if not (switches_grad or switches_autocast):
        return compiled

    def run_graph(*args):
        grad = torch.is_grad_enabled()
        autocast = autocast_state() if switches_autocast else None
        try:
            return compiled(*args)
        except BaseException:
            if autocast is not None:
                restore_autocast(autocast)
            torch._C._set_grad_enabled(grad)
            raise

    run_graph.compiled = compiled
    return run_graph


def side_by_side(original, rewritten, width: int = 60) -> str:
    left = [f"{i.offset:>4} {i.opname:<24} {i.argrepr}" for i in dis.get_instructions(original)]
    right = [f"{i.offset:>4} {i.opname:<24} {i.argrepr}" for i in dis.get_instructions(rewritten)]
    rows = [f"{'ORIGINAL':<{width}} | REWRITTEN"]
    for k in range(max(len(left), len(right))):
        a = left[k] if k < len(left) else ""
        b = right[k] if k < len(right) else ""
        rows.append(f"{a[:width]:<{width}} | {b}")
    return "\n".join(rows)
