"""``NullContextValue``: a context manager whose block is traced and whose enter and exit do nothing.

Made by trace rules answered as a compiler (``torch.autograd.profiler.record_function``:
captured code records no profiler ranges).  Its ``__exit__`` never exists at run time, so a
break inside the block is not resumed inside it (the frame around runs the block eagerly).
"""
from __future__ import annotations

from ..errors import GraphBreak
from .base import Value
from .constant import ConstantValue


class NullContextValue(Value):
    def __init__(self, what: str, why: str):
        self.what = what
        self.why = why

    def describe(self):
        return f"{self.what}(...)"

    def enter(self, tx) -> Value:
        """``BEFORE_WITH``: push the ``__exit__`` value; return the ``__enter__`` result."""
        tx.push(NullExitValue(self))
        return ConstantValue(None)


class NullExitValue(Value):
    def __init__(self, ctx: NullContextValue):
        self.ctx = ctx

    def describe(self):
        return f"__exit__ of {self.ctx.describe()}"

    def call(self, tx, args, kwargs):
        return ConstantValue(None)

    def reconstruct(self, cg) -> None:
        raise GraphBreak(f"a graph break inside a `with {self.ctx.describe()}` block ({self.ctx.why})")
