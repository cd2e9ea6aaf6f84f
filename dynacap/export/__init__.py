"""Export: a whole program as one ATen graph, a real ``torch.export.ExportedProgram``.

``export(fn_or_module, args)`` captures the program once with dynacap's own
engine (``trace.py``; every graph break is an ``ExportError`` naming its
file:line), lowers the graph to pre-dispatch ATen (``lower.py``), and builds
the program (``program.py``): parameters, buffers and constants lifted,
``nn_module_stack``/``stack_trace``/``source_fn_stack`` on every node, range
constraints for ``torch.export.Dim`` specs (``dims.py``), and torch.export's
post-trace passes (``passes.py``).  ``capture_pre_autograd_graph`` is the older name for
``export(...).module()``.  Torch's export machinery is imported only when
these are called.  The engine itself is left as it is: this package only
drives a capture and reads what it made.
"""
from __future__ import annotations

import inspect

from .errors import ExportError

__all__ = ["export", "capture_pre_autograd_graph", "ExportError"]


def export(fn_or_module, args: tuple, kwargs: dict | None = None, *, dynamic_shapes=None, strict: bool = True):
    """Capture ``fn_or_module(*args, **kwargs)`` as one graph and return a ``torch.export.ExportedProgram``.

    The program is in the training IR (pre-dispatch ATen, as ``torch.export.export``
    returns): ``aten.conv2d``, ``aten.linear``...  ``dynamic_shapes`` takes
    ``torch.export.Dim`` specs keyed like ``torch.export.export``'s; every other
    dim is static.  A graph break, or a dim given a ``Dim`` that the code
    specializes, raises ``ExportError`` naming the user's file:line.  ``strict`` is
    accepted for ``torch.export`` compatibility: dynacap always captures the bytecode.
    """
    import torch

    from ..optimize import _module_entry, unwrap
    from . import dims
    from .metadata import ModuleNames, type_name
    from .program import build_program
    from .trace import capture_once

    kwargs = dict(kwargs or {})
    if not isinstance(args, tuple):
        args = tuple(args) if isinstance(args, list) else (args,)
    target = unwrap(fn_or_module)
    if isinstance(target, torch.nn.Module):
        root = target
        entry = _module_entry(target)
        call = lambda *a, **k: entry(target, *a, **k)  # noqa: E731
        signature = _signature(type(target).forward, drop_self=True)
        names = ModuleNames(root, type_name(type(target)))
    else:
        root = torch.nn.Module()
        call = target
        signature = _signature(target)
        names = ModuleNames(None, type_name(type(root)))
    arg_names = dims.bound_names(signature, args, kwargs)
    example_inputs = (args, dict(kwargs))
    marks = None
    dynamic = False
    if dynamic_shapes is not None:
        marks = dims.mark_inputs(args, kwargs, dynamic_shapes, arg_names)
        args, kwargs = marks.args, marks.kwargs
        dynamic = None  # the marks decide, dim by dim
    captured = capture_once(call, args, kwargs, names, dynamic)
    submodules = _called_submodules(captured.lowered.gm)
    return build_program(captured, root, args, kwargs, arg_names, marks, submodules, example_inputs)


def capture_pre_autograd_graph(model, args: tuple, kwargs: dict | None = None, dynamic_shapes=None):
    """The ATen ``GraphModule`` of ``export(model, args, kwargs).module()`` (the name older PT2E code uses)."""
    return export(model, args, kwargs, dynamic_shapes=dynamic_shapes).module()


def _signature(fn, drop_self: bool = False):
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    if drop_self:
        params = list(signature.parameters.values())[1:]
        signature = signature.replace(parameters=params)
    return signature


def _called_submodules(gm) -> list[str]:
    """The submodules the program ran, in first-call order (``ModuleCallEntry``s for ``unflatten``)."""
    seen = []
    for node in gm.graph.nodes:
        for fqn, _ in (node.meta.get("nn_module_stack") or {}).values():
            if fqn and fqn not in seen:
                seen.append(fqn)
    return seen
