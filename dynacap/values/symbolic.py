"""``SymNumberValue``: a Python number the graph computes from symbolic sizes (dynamic shapes).

``x.size(0)`` of a tensor whose dim 0 is symbolic, an int argument made
symbolic, ``n * 4``, ``x.size(0) > 8``: each is a ``torch.SymInt`` /
``SymBool`` / ``SymFloat`` and the FX node computing it, so the graph works
for every size.  Arithmetic with constants or other symbolic numbers adds
nodes; passing one to a tensor operation (``x.view(n, -1)``) uses its node.

Where Python itself needs the number (``if``, ``range(n)``, a list index, a
dict key) the value is *specialized*: the answer comes from the size seen
while tracing, and torch's ShapeEnv records what it relied on
(``x.size(0) > 8``, or ``x.size(0) == 8`` for an exact use), which becomes
a guard of the entry.  So specializing is always sound; it only narrows
which sizes the entry accepts.  A number read from tensor data
(``config.capture_scalar_outputs``: an unbacked symbol) cannot be
specialized: Python code that needs its value is a graph break.
"""
from __future__ import annotations

import torch
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode, free_unbacked_symbols

from ..errors import GraphBreak
from .base import Value

#: Why Python cannot use a number read from tensor data.
_DATA_DEPENDENT = ("a number read from tensor data (`.item()`, the size of `nonzero` or a mask) {use}; "
                   "it is known only when the graph runs, so this runs eagerly (use torch.where, "
                   "torch.cond or torch._check to stay in the graph)")


class SymNumberValue(Value):
    def __init__(self, node, sym, source=None):
        self.node = node
        #: The ``torch.SymInt`` / ``SymBool`` / ``SymFloat`` (its hint is the value seen while tracing).
        self.fake = sym
        self.source = source

    def kind(self) -> str:
        return "symbolic number"

    def describe(self) -> str:
        if self.data_dependent():  # its symbol (``u0``) means nothing to a user
            return f"{self.python_type().__name__} read from tensor data"
        where = f" {self.source.expr()}" if self.source is not None else ""
        return f"symbolic {self.python_type().__name__}{where} ({self.fake})"

    def python_type(self) -> type:
        if isinstance(self.fake, torch.SymBool):
            return bool
        return int if isinstance(self.fake, torch.SymInt) else float

    def data_dependent(self) -> bool:
        """Whether the number is read from tensor data (an unbacked symbol: ``t.item()``, the size of
        ``nonzero``), which no guard can name."""
        return bool(free_unbacked_symbols(self.fake))

    # Usable wherever a constant is: reading it as one specializes it (and the ShapeEnv guards that).
    # A data-dependent one is not: its value exists only when the graph runs.
    def is_constant(self) -> bool:
        return not self.data_dependent()

    def as_constant(self):
        if self.data_dependent():
            raise GraphBreak(_DATA_DEPENDENT.format(use="used where Python needs its value"))
        return self.python_type()(self.fake)

    def real_object(self):
        return self.as_constant()

    def truth(self, tx) -> bool:
        try:
            # A data-dependent relation the ShapeEnv can decide from ranges alone (``n >= 0`` for
            # a size) needs no guard; any other cannot be decided at capture time.
            return bool(self.fake)
        except GuardOnDataDependentSymNode:
            raise GraphBreak(_DATA_DEPENDENT.format(use="decides a branch")) from None

    def reconstruct(self, cg) -> None:
        cg.load_tensor(self)  # an input is reloaded from its source, anything else is a graph output


class SymSliceValue(Value):
    """``a:b:c`` with a symbolic bound (``x[:, :n]``): a slice of nodes in the graph, so it stays symbolic."""

    def __init__(self, parts: list[Value]):
        self.parts = parts

    def describe(self) -> str:
        return "slice(" + ", ".join(p.describe() for p in self.parts) + ")"

    def python_type(self) -> type:
        return slice

    def is_constant(self) -> bool:
        return all(p.is_constant() for p in self.parts)

    def as_constant(self):
        return slice(*(p.as_constant() for p in self.parts))

    def real_object(self):
        return self.as_constant()

    def reconstruct(self, cg) -> None:
        for part in self.parts:
            part.reconstruct(cg)
        cg.append("BUILD_SLICE", len(self.parts))
