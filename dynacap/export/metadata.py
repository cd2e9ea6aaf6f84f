"""Node metadata for export: ``stack_trace``, ``nn_module_stack`` and ``source_fn_stack`` on every node.

Only a running trace knows the user's stack and the chain of modules whose
``forward`` is being inlined when a node is made, so the metadata is written
as each node is created, by a ``torch.fx.Graph`` subclass that export's
capture context puts in each trace's ``GraphBuilder`` (``RecordingGraph``).  The format is ``torch.export``'s:
``nn_module_stack`` maps a key to ``(fqn, "module.QualName")`` (strings, so
programs can be saved) with the root first; ``source_fn_stack`` names the
built-in ``torch.nn`` layer an operation came from, or the operation itself,
as quantizers (``get_source_partitions``) expect.  This module only writes
metadata; it never changes what a trace captures.
"""
from __future__ import annotations

import traceback

import torch
import torch.fx as fx

ROOT_KEY = "L__self__"


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


class RecordingGraph(fx.Graph):
    """An ``fx.Graph`` that writes export metadata on each node as the trace (``tctx``) creates it."""

    def __init__(self, tctx, names: ModuleNames):
        super().__init__()
        self._tctx = tctx
        self._names = names

    def create_node(self, op, target, args=None, kwargs=None, name=None, type_expr=None):
        node = super().create_node(op, target, args, kwargs, name, type_expr)
        if op not in ("placeholder", "output"):
            self._record(node)
        return node

    def _record(self, node: fx.Node) -> None:
        tracer = self._tctx.running  # the innermost frame of the inlined chain
        modules, frames = [], []
        while tracer is not None:
            frames.append(tracer.frame_summary())
            module = _self_module(tracer)
            if module is not None and (not modules or modules[-1] is not module):
                modules.append(module)
            tracer = tracer.parent
        modules.reverse()
        frames.reverse()
        layer = self._tctx.graph.attrs.get(node.target) if node.op == "call_module" else None
        if isinstance(layer, torch.nn.Module):
            modules.append(layer)
        node.meta["nn_module_stack"] = self._names.stack(modules)
        if frames:
            node.meta["stack_trace"] = "".join(traceback.format_list(frames))
        innermost = modules[-1] if modules else None
        if node.op == "call_module":
            node.meta["source_fn_stack"] = [(node.name, type(layer))]
        elif node.op in ("call_function", "call_method"):
            source = type(innermost) if innermost is not None and _is_layer(type(innermost)) else node.target
            node.meta["source_fn_stack"] = [(node.name, source)]


def _self_module(tracer):
    """The module a traced frame is a method of (its ``self``), if any."""
    from ..values.module import ModuleValue

    value = tracer.locals.get("self")
    return value.module if isinstance(value, ModuleValue) else None
