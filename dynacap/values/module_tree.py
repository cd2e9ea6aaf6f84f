"""``parameters()``, ``children()``, ``named_modules()``... of a module: its tree, walked as ``nn.Module`` does.

``nn.Module``'s own generators walk ``_modules``/``_parameters``/``_buffers``
in order, each module and tensor once (by identity).  The model walks the
same dictionaries through ``ModuleValue.getattr``, so each child and tensor is
reached (and guarded) through its own source, and answers with an iterator
over the items it knows (``next``, ``for``, ``list`` behave as on the
generator).  Which modules are the same object decides what is skipped: for
modules guarded by identity it is known; otherwise the partition is guarded.
"""
from __future__ import annotations

import inspect

import torch

from ..errors import GraphBreak
from .base import Value
from .constant import ConstantValue
from .containers import IteratorValue, TupleValue

#: The tree methods modelled, as nn.Module defines them (a subclass's own override is traced instead).
METHODS = ("parameters", "named_parameters", "buffers", "named_buffers", "children", "named_children",
           "modules", "named_modules")


def is_tree_method(module: torch.nn.Module, name: str) -> bool:
    return name in METHODS and getattr(type(module), name, None) is getattr(torch.nn.Module, name)


class ModuleTreeMethodValue(Value):
    def __init__(self, owner, name: str):
        self.owner = owner  # a ModuleValue
        self.name = name

    def describe(self):
        return f"{self.owner.describe()}.{self.name}"

    def call(self, tx, args, kwargs):
        signature = inspect.signature(getattr(torch.nn.Module, self.name))
        try:
            bound = signature.bind(self.owner, *args, **kwargs)
        except TypeError as e:
            raise GraphBreak(f"{self.describe()}: {e} (TypeError at run time)") from None
        bound.apply_defaults()
        options = {k: _constant(v, k) for k, v in list(bound.arguments.items())[1:]}
        name = self.name
        if name in ("children", "named_children"):
            items = _named_children(tx, self.owner)
        elif name in ("modules", "named_modules"):
            if options.get("memo") is not None:
                raise GraphBreak(f"{self.describe()} with a memo set")
            items = _named_modules(tx, self.owner, options.get("prefix", ""), options.get("remove_duplicate", True))
        else:
            kind = "_parameters" if "parameters" in name else "_buffers"
            items = _named_tensors(tx, self.owner, kind, options.get("prefix", ""), options.get("recurse", True),
                                   options.get("remove_duplicate", True))
        if not name.startswith("named_"):
            return IteratorValue([value for _, value in items])
        return IteratorValue([TupleValue([ConstantValue(n), value]) for n, value in items])


def _constant(value, name: str):
    if isinstance(value, Value):
        if not value.is_constant():
            raise GraphBreak(f"the `{name}` argument of a module tree method is known only at run time")
        return value.as_constant()
    return value


def _named_children(tx, module_value) -> list:
    """``named_children()``: each child once, in ``_modules`` order."""
    module_value.guard_children(tx)
    children = [(name, module_value.getattr(tx, name)) for name, child in module_value.module._modules.items()
                if child is not None]
    _guard_partition(tx, module_value, [value for _, value in children])
    items, seen = [], []
    for name, value in children:
        if not any(value.module is s for s in seen):
            seen.append(value.module)
            items.append((name, value))
    return items


def _named_modules(tx, module_value, prefix: str, remove_duplicate: bool) -> list:
    """``named_modules()``: preorder, names joined by dots; a module met again is skipped with its subtree."""
    reached, items, seen = [], [], []

    def walk(value, prefix):
        reached.append(value)
        if remove_duplicate:
            if any(value.module is s for s in seen):
                return
            seen.append(value.module)
        items.append((prefix, value))
        value.guard_children(tx)
        for name, child in value.module._modules.items():
            if child is not None:
                walk(value.getattr(tx, name), prefix + ("." if prefix else "") + name)

    walk(module_value, prefix)
    _guard_partition(tx, module_value, reached)
    return items


def _named_tensors(tx, module_value, kind: str, prefix: str, recurse: bool, remove_duplicate: bool) -> list:
    """``named_parameters()`` / ``named_buffers()``: per module (preorder), its own tensors, each once."""
    modules = _named_modules(tx, module_value, prefix, True) if recurse else [(prefix, module_value)]
    items, seen = [], []
    for module_prefix, value in modules:
        for name, tensor in value.module.__dict__[kind].items():
            if tensor is None or (remove_duplicate and any(tensor is s for s in seen)):
                continue
            seen.append(tensor)
            # Read through the module (guarded, a graph input or attribute); tied tensors are one graph value.
            items.append((module_prefix + ("." if module_prefix else "") + name, value.getattr(tx, name)))
    return items


def _guard_partition(tx, owner, values: list) -> None:
    """Which of ``values`` (ModuleValues) are the same object, guarded unless their identities are."""
    if len(values) < 2 or all(v.identity_known and v.source is not None for v in values):
        return
    sources = [v.source for v in values]
    if any(s is None for s in sources):
        raise GraphBreak(f"the modules of {owner.describe()} cannot all be reached from the frame")
    distinct = []
    for value in values:
        if not any(value.module is d.module for d in distinct):
            distinct.append(value)
    ids = ", ".join(f"id({s.expr()})" for s in sources)
    expr = f"len({{{ids}}}) == {len(distinct)}"
    for value in values:
        same = next(d for d in distinct if d.module is value.module)
        if same is not value:
            expr += f" and {value.source.expr()} is {same.source.expr()}"
    tx.guards.relation(expr, sources, f"the modules of {owner.describe()} are {len(distinct)} distinct objects")
