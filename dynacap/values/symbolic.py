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
which sizes the entry accepts.
"""
from __future__ import annotations

import torch

from .base import Value


class SymNumberValue(Value):
    def __init__(self, node, sym, source=None):
        self.node = node
        #: The ``torch.SymInt`` / ``SymBool`` / ``SymFloat`` (its hint is the value seen while tracing).
        self.fake = sym
        self.source = source

    def kind(self) -> str:
        return "symbolic number"

    def describe(self) -> str:
        where = f" {self.source.expr()}" if self.source is not None else ""
        return f"symbolic {self.python_type().__name__}{where} ({self.fake})"

    def python_type(self) -> type:
        if isinstance(self.fake, torch.SymBool):
            return bool
        return int if isinstance(self.fake, torch.SymInt) else float

    # Usable wherever a constant is: reading it as one specializes it (and the ShapeEnv guards that).
    def is_constant(self) -> bool:
        return True

    def as_constant(self):
        return self.python_type()(self.fake)

    def real_object(self):
        return self.as_constant()

    def truth(self, tx) -> bool:
        return bool(self.fake)

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
