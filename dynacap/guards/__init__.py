"""Guards: the assumptions a capture made, as data, and their compiled check.

``guard.py`` defines ``Guard`` and the ``GuardSet`` a trace accumulates;
``program.py`` lowers the guards to the data of a C guard program
(``csrc/guards.c``); ``check.py`` makes the check ``check(L, G) -> bool``
that the C hook calls with the frame's locals and globals (that program, or
with ``DYNACAP_PYTHON_GUARDS=1`` one generated Python function).  Nothing
here inspects bytecode or builds graphs.
"""
from .check import CompiledGuard, compile_guards
from .guard import Guard, GuardSet

__all__ = ["Guard", "GuardSet", "CompiledGuard", "compile_guards"]
