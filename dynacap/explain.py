"""``explain(fn)(*args)``: run once under capture and report graphs, breaks and guards."""
from __future__ import annotations

from dataclasses import dataclass, field

from . import hook
from .capture import CaptureContext, CaptureRecord


@dataclass
class ExplainOutput(CaptureRecord):
    """A ``CaptureRecord`` of one run, plus the run's result and a readable report (``str()``)."""

    result: object = None
    #: The rewritten frames, resume functions and guards of the run, as Python source (``decompile``).
    code: str = ""
    #: What the names in ``code`` stand for (compiled graphs, resume functions...): with the
    #: function's globals, enough to ``exec`` the rewritten frames.
    code_objects: dict = field(default_factory=dict)

    @property
    def graph_count(self) -> int:
        return len(self.graphs)

    @property
    def graph_break_count(self) -> int:
        return len(self.break_reasons)

    @property
    def op_count(self) -> int:
        return sum(sum(1 for n in g.graph.nodes if n.op in ("call_function", "call_method", "call_module"))
                   for g in self.graphs)

    @property
    def flops(self) -> list:
        """FLOPs of each graph at its captured shapes (``torch.utils.flop_counter``)."""
        from .fx_tools import flop_count

        return [flop_count(gm) for gm in self.graphs]

    def svg(self, index: int = 0) -> str:
        """Graph ``index`` drawn as SVG (boxes: node, operation, shape)."""
        from .fx_tools import graph_svg

        return graph_svg(self.graphs[index], f"Graph {index + 1}")

    def html(self) -> str:
        """The whole report as one offline HTML page: breaks, each graph drawn with its FLOPs, code, guards."""
        from .fx_tools import graph_svg

        esc = _escape
        parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>dynacap explain</title>",
                 "<style>body{font-family:sans-serif;margin:2em}pre{background:#f6f8fa;padding:1em;"
                 "overflow:auto}svg{border:1px solid #ddd;margin:.5em 0}</style></head><body>",
                 f"<h1>dynacap explain</h1><p>{self.graph_count} graph(s), {self.graph_break_count} break(s), "
                 f"{self.op_count} op(s)</p>"]
        if self.break_reasons:
            parts.append("<h2>Graph breaks</h2><ol>")
            parts.extend(f"<li><code>{esc(r.location())}</code>: {esc(r.reason)}</li>" for r in self.break_reasons)
            parts.append("</ol>")
        for i, gm in enumerate(self.graphs, 1):
            parts.append(f"<h2>Graph {i} ({esc(_flops_text(gm))})</h2>")
            parts.append(graph_svg(gm))
            parts.append(f"<pre>{esc(graph_with_shapes(gm))}</pre>")
        if self.code:
            parts.append(f"<h2>Rewritten code</h2><pre>{esc(self.code)}</pre>")
        if self.guards:
            parts.append("<h2>Guards</h2><pre>" + esc("\n".join(self.guards)) + "</pre>")
        parts.append("</body></html>")
        return "\n".join(parts)

    def __str__(self) -> str:
        lines = [
            f"Graph count: {self.graph_count}",
            f"Graph break count: {self.graph_break_count}",
            f"Op count: {self.op_count}",
        ]
        if self.break_reasons:
            lines.append("Break reasons:")
            for i, reason in enumerate(self.break_reasons, 1):
                lines.append(f"  {i}. {reason.location()}: {reason.reason}")
                for fs in reason.user_stack:
                    lines.append(f"       File \"{fs.filename}\", line {fs.lineno}, in {fs.name}")
                    if fs.line:
                        lines.append(f"         {fs.line}")
        for i, gm in enumerate(self.graphs, 1):
            lines.append(f"Graph {i} ({_flops_text(gm)}):")
            lines.extend("  " + line for line in graph_with_shapes(gm).splitlines())
        if self.guards:
            lines.append("Guards:")
            lines.extend("  " + g for g in self.guards)
        return "\n".join(lines)


def explain(fn):
    """``explain(fn)(*args, **kwargs)`` runs ``fn`` once under fresh capture and returns an ``ExplainOutput``.

    An ``optimize`` wrapper is explained with its ``dynamic`` option (the eager backend is used).
    """
    import torch

    from .backends import eager
    from .optimize import _module_entry, reset, unwrap

    options = getattr(fn, "_dynacap_ctx", None)
    dynamic = options.dynamic if options is not None else None
    target = unwrap(fn)
    if isinstance(target, torch.nn.Module):
        entry = _module_entry(target)
        call = lambda *args, **kwargs: entry(target, *args, **kwargs)  # noqa: E731
    else:
        call = target

    def run(*args, **kwargs):
        record = CaptureRecord()
        ctx = CaptureContext(eager, dynamic=dynamic, record=record)
        reset()
        try:
            result = hook.call_with_callback(ctx.callback, call, *args, **kwargs)
            code, objects = _entries_source(ctx, record)
        finally:
            reset()
        return ExplainOutput(**vars(record), result=result, code=code, code_objects=objects)

    return run


def _entries_source(ctx: CaptureContext, record: CaptureRecord) -> tuple[str, dict]:
    """Every cache entry ``ctx`` made, in capture order, as Python source (read before ``reset`` drops them)."""
    from .decompile import Namer, entry_source

    namer = Namer(record.graphs)
    parts = []
    for code, guard, rewritten in hook.entries_made_by(ctx.callback):
        parts.append(entry_source(code, rewritten, guard, namer))  # never raises
    return "\n\n".join(parts), namer.used


def explain_file(target: str, args_spec=None, kwargs_spec=None, init_spec=None, dynamic=None) -> ExplainOutput:
    """``explain`` of ``FILE.py:NAME`` (a function, or an ``nn.Module`` class built with ``init_spec``, in eval
    mode) called with arguments built from specs (``dynacap corpus``'s: ``{"tensor": [2, 3]}``...).

    For ``dynacap explain``: it imports and runs the file's code, as ``python FILE.py`` would.
    """
    import importlib.util
    import pathlib
    import sys

    import torch

    from .harness.values import build, build_kwargs

    path, _, name = target.rpartition(":")
    if not path or not name:
        raise ValueError(f"expected FILE.py:NAME, got {target!r}")
    file = pathlib.Path(path).resolve()
    spec = importlib.util.spec_from_file_location(f"dynacap_explained_{file.stem}", file)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(file.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(file.parent))
    obj = getattr(module, name)
    gen = torch.Generator().manual_seed(0)
    if isinstance(obj, type) and issubclass(obj, torch.nn.Module):
        init = build(init_spec or [], gen)
        obj = obj(*init).eval()
    args = build(args_spec or [], gen)
    kwargs = build_kwargs(kwargs_spec, gen)
    fn = obj
    if dynamic is not None:
        from .optimize import optimize

        fn = optimize(obj, dynamic=dynamic)
    return explain(fn)(*args, **kwargs)


def graph_with_shapes(gm) -> str:
    """The graph as ``torch.fx`` prints it, each node followed by its propagated shape."""
    from .fx_tools import node_shape

    lines = ["graph():"]
    for node in gm.graph.nodes:
        text = node.format_node()
        if text:
            shape = node_shape(node) if node.op != "output" else ""
            lines.append(f"    {text}" + (f"  # {shape}" if shape else ""))
    return "\n".join(lines)


def _flops_text(gm) -> str:
    from .fx_tools import flop_count

    try:
        return f"{flop_count(gm)} FLOPs"
    except Exception as e:  # an op the counter cannot run on fakes: the report still prints
        return f"FLOPs unknown: {type(e).__name__}"


def _escape(text: str) -> str:
    import html

    return html.escape(str(text))
