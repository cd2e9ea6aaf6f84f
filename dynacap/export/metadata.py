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
        self._module = {}
        if root is not None:
            for name, module in root.named_modules(remove_duplicate=False):
                self._fqn.setdefault(id(module), name)
                self._module[name] = module

    def fqn(self, module) -> str | None:
        return self._fqn.get(id(module))

    def stack(self, modules) -> dict:
        """``nn_module_stack`` for a chain of modules (outermost first); modules outside the root are left out.

        A ``Sequential`` runs its children without a frame of its own (capture runs its loop in the
        caller), so one between two modules of the chain (``layers`` between ``""`` and ``layers.0``)
        is put back, as its ``forward`` would have been on the stack.
        """
        stack = {ROOT_KEY: ("", self.root_type)}
        outer = ""
        for module in modules:
            fqn = self.fqn(module)
            if not fqn:  # outside the root, or the root itself (already there)
                continue
            for between in _ancestors(fqn, outer):
                container = self._module.get(between)
                if type(container) is torch.nn.Sequential:
                    self._add(stack, between, container)
            self._add(stack, fqn, module)
            outer = fqn
        return stack

    @staticmethod
    def _add(stack: dict, fqn: str, module) -> None:
        stack[ROOT_KEY + fqn] = (fqn, type_name(type(module)))


def _ancestors(fqn: str, outer: str) -> list[str]:
    """The fqns strictly between ``outer`` and ``fqn`` (``"a"`` for ``"a.0"`` under ``""``), outermost first."""
    parts = fqn.split(".")
    names = [".".join(parts[:i]) for i in range(1, len(parts))]
    return [n for n in names if not outer or (n.startswith(outer + ".") and n != outer)]


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
