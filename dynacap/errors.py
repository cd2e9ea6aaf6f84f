"""Exceptions of the capture engine.

``Unsupported`` is public: ``fullgraph=True`` raises it at the first graph
break.  ``GraphBreak`` is internal: the interpreter raises it when it meets
something it cannot capture; the frame converter catches it and records a
``BreakReason``.  Messages are for users: they never show the engine's
internal names (``user_text``), and frames of generated code carry the name
users know them by (``frame_name``: ``f (resumed at line 12)``).  Nothing
here imports the rest of dynacap.
"""
from __future__ import annotations

import re
import traceback
import weakref
from dataclasses import dataclass, field

#: Generated code (resume and chain functions) -> the name messages give its frames.
_FRAME_NAMES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
#: Generated code whose frames are left out of a user stack that has other frames (chain functions).
_HIDDEN: "weakref.WeakSet" = weakref.WeakSet()


def set_frame_name(code, name: str, *, hidden: bool = False) -> None:
    """Name the frames of ``code`` in messages and logs (for generated code)."""
    _FRAME_NAMES[code] = name
    if hidden:
        _HIDDEN.add(code)


def is_generated(code) -> bool:
    """Whether ``code`` is dynacap's own (a resume or chain function): it was given a frame name."""
    return code in _FRAME_NAMES


def frame_name(code) -> str:
    """How messages name a frame of ``code``: its own name, or what generated code stands for."""
    return _FRAME_NAMES.get(code, code.co_name)


#: A guard-style reference (``L['x']``, ``G['torch']``, ``___g_mod['name']``) and the accessors after it.
_REFERENCE = re.compile(r"\b(?:[LGB]|___g_\w+)\[(['\"])(?P<name>[^'\"]+)\1\](?P<rest>(?:\.\w+|\[[^\]]*\])*)")
#: The engine's own locals: the value stack of resume and chain functions, graph outputs, temporaries.
_INTERNAL_NAME = re.compile(r"\b___\w+(?:(?:\.\w+|\[[^\]]*\])*)")
COMPUTED_HERE = "a value computed here"


def user_text(message: str) -> str:
    """``message`` with references written as users write them: ``L['x'].w`` is ``x.w``, and
    the engine's internal locals (``L['___stack0']``, ``___l0_s1``) are "a value computed here"."""
    def reference(m):
        if m.group("name").startswith("___"):
            return COMPUTED_HERE
        if m.group("name") == ".0":  # the argument CPython gives a comprehension's code
            return "(the comprehension's iterable)" + m.group("rest")
        return m.group("name") + m.group("rest")

    return _INTERNAL_NAME.sub(COMPUTED_HERE, _REFERENCE.sub(reference, message))


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
        stack = list(self.user_stack)
        if len(stack) == len(self.frames):  # one summary per traced frame: name generated ones
            named = []
            for summary, frame in zip(stack, self.frames):
                code = frame.tracer.code
                if code in _HIDDEN:
                    continue
                name = frame_name(code)
                if name != summary.name:
                    summary = traceback.FrameSummary(summary.filename, summary.lineno, name, line=summary.line)
                named.append(summary)
            stack = named or stack
        return BreakReason(user_text(self.reason), stack)


class Unsupported(RuntimeError):
    """A graph break under ``fullgraph=True``: names the user's file:line and the reason."""

    def __init__(self, reason: BreakReason):
        self.break_reason = reason
        stack = str(reason).split("\n", 1)[1:]  # the reason once, then the user's stack
        super().__init__("\n".join([f"{reason.location()}: {reason.reason}", *stack]))


class ConstraintViolation(Unsupported):
    """A dim marked with ``mark_dynamic`` was specialized to a constant by the captured code."""


class BackendError(RuntimeError):
    """The backend failed to compile a captured graph."""
