"""Grad-mode context managers (``torch.no_grad()``, ``torch.enable_grad()``) in ``with`` blocks,
and ``torch.set_grad_enabled(mode)`` called or entered.

Entering records a ``torch._C._set_grad_enabled`` node in the graph and
switches the real grad mode for the rest of the trace (so fake tensors get
the right ``requires_grad``); the ``__exit__`` value pushed by
``BEFORE_WITH`` switches back.  The tracer keeps the active blocks in
``Tracer.blocks`` so that a graph break inside one can re-enter it in the
resume function.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import GraphBreak
from .base import Value
from .constant import ConstantValue


@dataclass
class WithBlock:
    """An active ``with`` block on a grad-mode context (the only kind captured)."""

    ctx_class: type  # torch.no_grad or torch.enable_grad


class GradModeValue(Value):
    """An instance of ``torch.no_grad`` / ``torch.enable_grad``, not yet entered."""

    def __init__(self, ctx_class: type):
        self.ctx_class = ctx_class

    @property
    def mode(self) -> bool:
        return self.ctx_class is torch.enable_grad

    def describe(self):
        return f"torch.{self.ctx_class.__name__}()"

    def python_type(self):
        return self.ctx_class

    def enter(self, tx) -> Value:
        """``BEFORE_WITH``: push the ``__exit__`` value; return the ``__enter__`` result."""
        prev = torch.is_grad_enabled()
        tx.graph.set_grad_enabled(self.mode)
        torch._C._set_grad_enabled(self.mode)
        exit_value = GradExitValue(self, prev)
        tx.push(exit_value)
        tx.blocks.append(WithBlock(self.ctx_class))
        return ConstantValue(None)

    def reconstruct(self, cg):
        cg.append("PUSH_NULL")
        cg.load_const(self.ctx_class)
        cg.append("PRECALL", 0)
        cg.append("CALL", 0)


class GradExitValue(Value):
    """The bound ``__exit__`` of an entered grad-mode block."""

    def __init__(self, ctx: GradModeValue, prev: bool):
        self.ctx = ctx
        self.prev = prev

    def describe(self):
        return f"__exit__ of {self.ctx.describe()}"

    def call(self, tx, args, kwargs):
        if not tx.blocks or tx.blocks[-1].ctx_class is not self.ctx.ctx_class:
            raise GraphBreak("with-blocks exited out of order")
        tx.blocks.pop()
        tx.graph.set_grad_enabled(self.prev)
        torch._C._set_grad_enabled(self.prev)
        return ConstantValue(None)


class GradSetValue(Value):
    """``torch.set_grad_enabled(mode)``: the mode switched when it is called (as eager does).

    Used in a ``with`` block it restores the mode from before the call on exit, which is
    the block of ``torch.no_grad()`` / ``torch.enable_grad()`` entered at the call.
    """

    def __init__(self, tx, mode: bool):
        self.mode = mode
        self.prev = torch.is_grad_enabled()
        tx.graph.set_grad_enabled(mode)
        torch._C._set_grad_enabled(mode)

    def describe(self):
        return f"torch.set_grad_enabled({self.mode})"

    def python_type(self):
        return torch.set_grad_enabled

    def enter(self, tx) -> Value:
        block = GradModeValue(torch.enable_grad if self.mode else torch.no_grad)
        tx.push(GradExitValue(block, self.prev))
        tx.blocks.append(WithBlock(block.ctx_class))
        return ConstantValue(None)
