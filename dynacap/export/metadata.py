"""Node metadata for export: ``stack_trace``, ``nn_module_stack`` and ``source_fn_stack`` on every node.

Only a running trace knows the user's stack and the chain of modules whose
``forward`` is being inlined when a node is made, so the metadata is written
as each node is created, by a ``torch.fx.Graph`` subclass put in the trace's
``GraphBuilder`` (``recording``).  The format is ``torch.export``'s:
``nn_module_stack`` maps a key to ``(fqn, "module.QualName")`` (strings, so
programs can be saved) with the root first; ``source_fn_stack`` names the
built-in ``torch.nn`` layer an operation came from, or the operation itself,
as quantizers (``get_source_partitions``) expect.  This module only writes
metadata; it never changes what a trace captures.
"""
from __future__ import annotations

import threading
import traceback
from contextlib import contextmanager

import torch
import torch.fx as fx

ROOT_KEY = "L__self__"

_active = threading.local()


def type_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _is_layer(cls: type) -> bool:
    """A built-in torch.nn layer (not a container): quantizers match its operations by its class."""
    module = cls.__module__
    return module.startswith(("torch.nn.modules", "torch.ao.")) and not module.startswith("torch.nn.modules.container")


class ModuleNames:
    """Fully qualified names of the modules of the exported root, by identity."""

    def __init__(self, root: torch.nn.Module | None, root_type: str):
        self.root = root
        self.root_type = root_type
        self._fqn = {}
        if root is not None:
            for name, module in root.named_modules(remove_duplicate=False):
                self._fqn.setdefault(id(module), name)

    def fqn(self, module) -> str | None:
        return self._fqn.get(id(module))

    def stack(self, modules) -> dict:
        """``nn_module_stack`` for a chain of modules (outermost first); modules outside the root are left out."""
        stack = {ROOT_KEY: ("", self.root_type)}
        for module in modules:
            fqn = self.fqn(module)
            if fqn:  # the root itself ("") is already there
                stack[ROOT_KEY + "_" + fqn.replace(".", "_")] = (fqn, type_name(type(module)))
        return stack


class _RecordingGraph(fx.Graph):
    """An ``fx.Graph`` that writes export metadata on each node as the trace creates it."""

    def __init__(self, builder, names: ModuleNames):
        super().__init__()
        self._builder = builder
        self._names = names

    def create_node(self, op, target, args=None, kwargs=None, name=None, type_expr=None):
        node = super().create_node(op, target, args, kwargs, name, type_expr)
        if op not in ("placeholder", "output"):
            self._record(node)
        return node

    def _record(self, node: fx.Node) -> None:
        tracer = _running_tracer(self._builder)
        modules, frames = [], []
        while tracer is not None:
            frames.append(tracer.frame_summary())
            module = _self_module(tracer)
            if module is not None and (not modules or modules[-1] is not module):
                modules.append(module)
            tracer = tracer.parent
        modules.reverse()
        frames.reverse()
        layer = self._builder.attrs.get(node.target) if node.op == "call_module" else None
        if isinstance(layer, torch.nn.Module):
            modules.append(layer)
        stack = self._names.stack(modules)
        node.meta["nn_module_stack"] = stack
        if frames:
            node.meta["stack_trace"] = "".join(traceback.format_list(frames))
        innermost = modules[-1] if modules else None
        if node.op == "call_module":
            node.meta["source_fn_stack"] = [(node.name, type(layer))]
        elif node.op in ("call_function", "call_method"):
            source = type(innermost) if innermost is not None and _is_layer(type(innermost)) else node.target
            node.meta["source_fn_stack"] = [(node.name, source)]


def _running_tracer(builder):
    """The tracer whose instruction made the node (the innermost frame of the inlined chain), if known."""
    owner = getattr(builder.before_node, "__self__", None)  # the TraceContext (it installs that hook)
    return getattr(owner, "running", None)


def _self_module(tracer):
    """The module a traced frame is a method of (its ``self``), if any."""
    from ..values.module import ModuleValue

    value = tracer.locals.get("self")
    return value.module if isinstance(value, ModuleValue) else None


@contextmanager
def recording(names: ModuleNames):
    """While active, traces on this thread record export metadata on their nodes.

    Until capture offers a per-trace hook, the builder factory that ``capture`` calls is
    wrapped (once, for good); the wrapper only acts on a thread inside ``recording``.
    """
    _install()
    previous = getattr(_active, "names", None)
    _active.names = names
    try:
        yield
    finally:
        _active.names = previous


def _install() -> None:
    from .. import capture

    original = capture.GraphBuilder
    if getattr(original, "_dynacap_export_factory", False):
        return

    def factory(*args, **kwargs):
        builder = original(*args, **kwargs)
        names = getattr(_active, "names", None)
        if names is not None:
            builder.graph = _RecordingGraph(builder, names)
        return builder

    factory._dynacap_export_factory = True
    capture.GraphBuilder = factory
