"""Capturing a whole program once for export: one graph, lowered to ATen, and what fed and left it.

``capture_once`` runs the function (or module) once under a fresh capture
context whose traces record node metadata (``metadata.py``).  The backend lowers
the graph to ATen right away (``lower.py``: a symbolic trace's ShapeEnv is
frozen once the backend returns) and hands back a wrapper that notes the
real values the graph receives and returns, so that ``program.py`` can map
placeholders to the user's arguments and the result's leaves to graph
outputs by identity.  Every graph break is collected (the run goes on past
them, as ``explain`` does) and raised as one ``ExportError``; a lowering
failure is named at the user's line.  Nothing here builds the program.
"""
from __future__ import annotations

import traceback
from dataclasses import dataclass, field

from .. import hook
from ..capture import CaptureContext, CaptureRecord
from ..errors import BreakReason, Unsupported
from .errors import ExportError
from .lower import Lowered, LoweringError, backend_choice_off, lower
from .metadata import ModuleNames, RecordingGraph


@dataclass
class Captured:
    """One run's capture: the torch-level graph, its ATen lowering, and the real values around it."""

    gm: object
    lowered: Lowered | None  # None: not lowered (the run had already broken)
    example_inputs: list
    graph_inputs: list = field(default_factory=list)
    graph_outputs: tuple = ()
    result: object = None


#: Past this many breaks the run goes on uncaptured: the export has failed, and code run eagerly after
#: a break (a library, or torch's own compiler behind ``torch.cond``) can break hundreds of times.
MAX_BREAKS = 20


class _ExportContext(CaptureContext):
    """A capture context whose traces record export metadata on their nodes."""

    def __init__(self, backend, names: ModuleNames, dynamic, record: CaptureRecord):
        super().__init__(backend, fullgraph=False, dynamic=dynamic, record=record)
        self.names = names

    def on_frame(self, code, func, f_locals, f_globals, f_builtins):
        if len(self.record.break_reasons) >= MAX_BREAKS:
            return None
        return super().on_frame(code, func, f_locals, f_globals, f_builtins)

    def on_trace(self, tctx) -> None:
        tctx.graph.graph = RecordingGraph(tctx, self.names)
        tctx.guards_kept = False


class _ExportBackend:
    """Lowers each graph it is given and returns a runner that notes its real inputs and outputs.

    Once the run has broken, export fails anyway: later graphs only run (the breaks are listed).
    """

    def __init__(self, record: CaptureRecord):
        self.record = record
        self.captured: list[Captured] = []
        self.failures: list[LoweringError] = []

    def __call__(self, gm, example_inputs):
        if self.record.break_reasons:
            self.captured.append(Captured(gm, None, []))
            return gm.forward
        try:
            lowered = lower(gm, list(example_inputs))
        except LoweringError as e:
            self.failures.append(e)
            return gm.forward
        captured = Captured(gm, lowered, list(example_inputs))
        self.captured.append(captured)

        def run(*args):
            out = gm.forward(*args)
            captured.graph_inputs, captured.graph_outputs = list(args), tuple(out)
            return out

        return run


def capture_once(call, args: tuple, kwargs: dict, names: ModuleNames, dynamic) -> Captured:
    """Run ``call(*args, **kwargs)`` once under capture; the one graph it made, or ``ExportError``."""
    record = CaptureRecord()
    backend = _ExportBackend(record)
    ctx = _ExportContext(backend, names, dynamic, record)
    try:
        with backend_choice_off():
            result = hook.call_with_callback(ctx.callback, call, *args, **kwargs)
    except ExportError:
        raise
    except Unsupported as e:  # a dim asked dynamic that the code specialized
        raise ExportError([e.break_reason]) from None
    finally:
        _forget_entries(ctx)
    reasons = list(record.break_reasons) + [_lowering_reason(f) for f in backend.failures]
    if reasons:
        stopped = len(record.break_reasons) >= MAX_BREAKS
        raise ExportError(reasons, f"(capture stopped after {MAX_BREAKS} breaks: the rest of the run was not "
                                   "captured)" if stopped else None)
    if len(backend.captured) != 1:
        what = "no graph" if not backend.captured else f"{len(backend.captured)} graphs"
        raise ExportError([BreakReason(
            f"the program made {what} (export needs exactly one: tensor operations, all of them in the "
            "function's own frame and what it calls)")])
    captured = backend.captured[0]
    captured.result = result
    return captured


def _forget_entries(ctx: CaptureContext) -> None:
    """Drop the cache entries the export's capture made: no later call can use them (their context is
    gone), and they would keep the model's tensors alive until ``dynacap.reset()``."""
    for code, guard, _ in hook.entries_made_by(ctx.callback):
        hook.drop_entries(code, guard)


def _lowering_reason(failure: LoweringError) -> BreakReason:
    """A lowering failure as a break at the user's line of the torch-level node that failed."""
    error = failure.error
    text = str(error).strip().splitlines()
    first = text[0] if text else type(error).__name__
    if "data-dependent" in str(error) or "DataDependent" in type(error).__name__:
        first = f"an operation's result depends on tensor data ({first})"
    stack = []
    node = failure.node
    trace = node.meta.get("stack_trace") if node is not None else None
    if trace:
        stack = _parse_stack(trace)
    what = f"lowering `{node.format_node()}` to ATen failed" if node is not None else "lowering to ATen failed"
    return BreakReason(f"{what}: {type(error).__name__}: {first}", stack)


def _parse_stack(trace: str) -> list[traceback.FrameSummary]:
    """``traceback.format_list`` text back to frame summaries (file, line, function, code)."""
    import re

    frames = []
    lines = trace.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r'\s*File "(.*)", line (\d+), in (.*)$', line)
        if m:
            code = lines[i + 1].strip() if i + 1 < len(lines) and not lines[i + 1].lstrip().startswith("File ") else None
            frames.append(traceback.FrameSummary(m.group(1), int(m.group(2)), m.group(3), line=code))
    return frames

