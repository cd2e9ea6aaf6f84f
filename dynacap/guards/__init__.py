"""Guards: the assumptions a capture made, as data, and their compiled check.

``guard.py`` defines ``Guard`` and the ``GuardSet`` a trace accumulates;
``check.py`` turns a ``GuardSet`` into one fast Python function
``check(L, G) -> bool`` that the C hook calls with the frame's locals and
globals.  Nothing here inspects bytecode or builds graphs.
"""
from .check import CompiledGuard, compile_guards
from .guard import Guard, GuardSet

__all__ = ["Guard", "GuardSet", "CompiledGuard", "compile_guards"]
