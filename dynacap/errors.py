"""Exceptions of the capture engine.

``Unsupported`` is public: ``fullgraph=True`` raises it at the first graph
break.  ``GraphBreak`` is internal: the interpreter raises it when it meets
something it cannot capture; the frame converter catches it and records a
``BreakReason``.  Nothing here imports the rest of dynacap.
"""
from __future__ import annotations

import traceback
from dataclasses import dataclass, field


@dataclass
class BreakReason:
    """Why capture stopped, written for users, with the user's stack (outermost first)."""

    reason: str
    user_stack: list[traceback.FrameSummary] = field(default_factory=list)

    def location(self) -> str:
        if not self.user_stack:
            return "<unknown location>"
        top = self.user_stack[-1]
        return f"{top.filename}:{top.lineno}"

    def __str__(self) -> str:
        lines = [self.reason]
        for fs in self.user_stack:
            lines.append(f"  File \"{fs.filename}\", line {fs.lineno}, in {fs.name}")
            if fs.line:
                lines.append(f"    {fs.line.strip()}")
        return "\n".join(lines)


class GraphBreak(Exception):
    """Raised inside the interpreter: this instruction or call cannot be captured.

    ``reason`` is the user-facing explanation; the interpreter attaches the
    user stack (``user_stack``) where the break happened.
    """

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason
        self.user_stack: list[traceback.FrameSummary] = []
        #: ``FrameAtBreak`` per frame of the inlined call chain, outermost first (filled by the tracer).
        self.frames: list = []

    def to_reason(self) -> BreakReason:
        return BreakReason(self.reason, list(self.user_stack))


class Unsupported(RuntimeError):
    """A graph break under ``fullgraph=True``: names the user's file:line and the reason."""

    def __init__(self, reason: BreakReason):
        self.break_reason = reason
        super().__init__(f"{reason.location()}: {reason.reason}\n{reason}")


class BackendError(RuntimeError):
    """The backend failed to compile a captured graph."""
