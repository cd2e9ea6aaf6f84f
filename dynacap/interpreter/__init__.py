"""The symbolic bytecode interpreter: runs a frame's bytecode over ``Value``s.

``tracer.py`` holds the interpreter state and main loop; each ``ops_*.py``
module handles one family of opcodes (variables, operators, calls,
containers, control flow).  To find where an opcode is handled, grep for
``@handles("OPNAME"``.
"""
from .tracer import CellBox, TraceContext, Tracer

# Importing the opcode families registers their handlers in ``tracer.HANDLERS``.
from . import operators, ops_calls, ops_containers, ops_control, ops_variables  # noqa: E402,F401

__all__ = ["Tracer", "TraceContext", "CellBox"]
