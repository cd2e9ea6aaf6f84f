"""The frame callback: decide, trace, compile and build a cache entry for one frame.

The C hook calls ``CaptureContext.on_frame`` on a cache miss.  It skips
code dynacap must not capture, enforces the cache size limit, runs the
symbolic interpreter, hands the graph to the backend, generates the
rewritten code, compiles the guards, and returns ``(guard, code)`` for the
hook to cache and run.  On a graph break the frame runs eagerly; on an
internal error too (unless ``config.suppress_errors`` is False).  This is
the only module that ties the pipeline stages together.

A capture holds Ctrl-C until a safe point and puts every torch mode back
however it ends (``modes.py``); an interrupted capture leaves no entry and
no mark, so the frame is captured again on its next call.
"""
from __future__ import annotations

import dis
import functools
import logging
import time
import types
import warnings
import weakref
from dataclasses import dataclass, field

from . import config, hook, logs
from ._C import set_callback
import torch

from .codegen import resume
from .codegen.breaks import BreakCodegen, plan_levels
from .codegen.emitter import Emitter
from .codegen.rewrite import build_rewritten_code, emit_side_effects
from .dynamic import ShapePolicy
from .errors import BackendError, BreakReason, GraphBreak, Unsupported, frame_name, user_text
from .graph import GraphBuilder
from .graph.effects import preserving_versions
from .graph.shapes import NeedsSymbolicShapes
from .guards import compile_guards
from .interpreter import TraceContext, Tracer
from .skipfiles import is_skipped_file
from .modes import TorchState, preserving_warning_registries, restoring_modes_on_error
from .modes import interrupts as _interrupts
from .values.keyed_dicts import NeedsKeyedDict

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
            self._log_recompile(code, entries[0], f_locals, f_globals)
            if len(entries) >= config.cache_size_limit:
                if code not in _warned_cache_limit:
                    _warned_cache_limit.add(code)
                    warnings.warn(self._cache_limit_message(code, entries[0], f_locals, f_globals), stacklevel=2)
                self.run_eagerly(code)
                return None
        state = TorchState()
        try:
            with _interrupts, preserving_warning_registries():
                entry = self.capture_frame(code, f_locals, f_globals, f_builtins)
        except Unsupported:
            raise
        except Exception as e:
            if not config.suppress_errors:
                raise
            warnings.warn(f"dynacap: internal error while capturing {frame_name(code)} "
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
        policy = ShapePolicy(code, self.dynamic)
        symbolic, keyed = policy.expects_symbolic(), frozenset()
        # A trace may learn it began with the wrong view of an input (a size that must be symbolic,
        # a dict keyed by tensors): it starts again, knowing.  Each lesson is learnt once.
        while True:
            try:
                return self._capture(code, f_locals, f_globals, f_builtins, policy, symbolic, keyed, start)
            except NeedsSymbolicShapes:
                if symbolic:
                    raise
                symbolic = True
            except NeedsKeyedDict as e:
                if e.source_expr in keyed:
                    raise
                keyed |= {e.source_expr}

    def _capture(self, code, f_locals, f_globals, f_builtins, policy: ShapePolicy, symbolic: bool,
                 keyed: frozenset, start: float):
        tctx = TraceContext(f_globals, f_builtins, initial_grad=torch.is_grad_enabled(),
                            graph=GraphBuilder(symbolic=symbolic), shapes=policy, keyed_dicts=keyed)
        self.on_trace(tctx)
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
            resumable = e.frames and _grad_mode_of_blocks(e.frames, tctx.initial_grad) == \
                e.frames[-1].checkpoint.grad_enabled
            # (Otherwise torch.set_grad_enabled(...) called outside a with block set the mode at the
            # break: no resume function could start in it, so the frame runs eagerly.)
            new_code = (self.resume_after_break(code, tctx, e) if resumable else None) or code
        finally:
            while tctx.autocasts:  # leave autocast blocks the trace entered (a break inside one)
                tctx.autocasts.pop().__exit__(None, None, None)
            torch._C._set_grad_enabled(tctx.initial_grad)
        tctx.guards.distinct_tensors([i.source for i in tctx.graph.inputs if isinstance(i.example, torch.Tensor)])
        if tctx.graph.shapes is not None:
            # After the backend compiled: it may have added assumptions of its own.
            expressions, sources = tctx.graph.shapes.guards()
            for expr in expressions:
                tctx.guards.relation(expr, sources, kind="SYMBOLIC_SHAPE")
        guard = compile_guards(tctx.guards, f_builtins)
        self._log_entry(code, new_code, guard)
        if self.record is not None:
            self.record.guards.extend(guard.describe())
            self.record.compile_times.append(time.perf_counter() - start)
            self.record.frames += 1
        # When a model the guard holds weakly dies, the entry goes with it (and frees its graph).
        guard.death_watch = [weakref.ref(obj, functools.partial(_drop_entry, code, guard.fn))
                             for obj in guard.weakly_guarded()]
        # The hook calls the generated function itself (no Python-level __call__ in between).
        return (guard.fn, new_code)

    def on_trace(self, tctx: TraceContext) -> None:
        """Called with each new trace's ``TraceContext`` before it runs (export records node metadata)."""

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
                logs.get("breaks").debug("cannot resume at depth %d: %s", level, user_text(why.reason))
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
        logs.get("graph").debug("captured graph for %s (%s:%s):\n%s", frame_name(code), code.co_filename,
                                code.co_firstlineno, gm.graph)
        example_inputs = tctx.graph.example_inputs()
        try:
            with _interrupts.released():  # a long compile (inductor) stays interruptible
                compiled = self.backend(gm, example_inputs)
        except Exception as e:
            raise BackendError(f"backend {getattr(self.backend, '__name__', self.backend)!r} failed on the graph "
                               f"of {frame_name(code)}: {type(e).__name__}: {e}") from e
        compiled = restoring_modes_on_error(preserving_versions(run_without_capture(compiled), gm), gm)
        return compiled, tctx.graph.inputs, {node: i for i, node in enumerate(outputs)}

    # -- logs --------------------------------------------------------------------------
    def _cache_limit_message(self, code, entry, f_locals, f_globals) -> str:
        failing = _failing(entry, f_locals, f_globals)
        text = (f"dynacap: {frame_name(code)} ({code.co_filename}:{code.co_firstlineno}) was recompiled "
                f"config.cache_size_limit={config.cache_size_limit} times; running it eagerly from now on")
        if failing is None:
            return text
        guard, why = failing
        text += f". The last recompile was for: {user_text(why)}"
        is_int = guard.kind == "EQUALS_MATCH" and int in guard.constants.values()  # ``type(s) is int and ...``
        if guard.kind in ("TENSOR_MATCH", "SYMBOLIC_SHAPE") or is_int:
            hint = "this int varies" if is_int else "sizes vary"
            text += (f"; if {hint} between calls, dynacap.mark_dynamic(tensor, dim) or "
                     "optimize(..., dynamic=True) compiles one graph for all of them")
        return text

    def _log_recompile(self, code, entry, f_locals, f_globals) -> None:
        """One line per recompile: the guard that failed in the most recently used entry."""
        log = logs.get("recompiles")
        if log.isEnabledFor(logging.DEBUG):
            failing = _failing(entry, f_locals, f_globals)
            log.debug("recompiling %s (%s:%s): guard failed: %s", frame_name(code), code.co_filename,
                      code.co_firstlineno, failing[1] if failing else None)

    def _log_entry(self, code, new_code, guard) -> None:
        glog = logs.get("guards")
        if glog.isEnabledFor(logging.DEBUG):
            glog.debug("guards for %s:\n  %s", frame_name(code), "\n  ".join(guard.describe()))
        blog = logs.get("bytecode")
        if blog.isEnabledFor(logging.DEBUG):
            blog.debug("bytecode of %s:\n%s", frame_name(code), side_by_side(code, new_code))
        clog = logs.get("code")
        if clog.isEnabledFor(logging.DEBUG):
            from .decompile import entry_source

            clog.debug("code of %s:\n%s", frame_name(code), entry_source(code, new_code, guard.fn))


def _drop_entry(code, guard_fn, _dead) -> None:
    hook.drop_entries(code, guard_fn)


def _failing(entry, f_locals, f_globals):
    """The first guard of a cache entry that fails for these locals and globals and how (slow: for messages)."""
    compiled = getattr(entry[0], "compiled_guard", None)
    return compiled.failing(f_locals, f_globals) if compiled is not None else None


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
        previous = set_callback(None)
        try:
            return compiled(*args)
        finally:
            set_callback(previous)

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


def _grad_mode_of_blocks(frames, initial: bool) -> bool:
    """The grad mode the captured ``no_grad``/``enable_grad`` blocks open at a break imply."""
    mode = initial
    for frame in frames:
        for block in frame.checkpoint.blocks:
            if block.ctx_class in (torch.no_grad, torch.enable_grad):
                mode = block.ctx_class is torch.enable_grad
    return mode
