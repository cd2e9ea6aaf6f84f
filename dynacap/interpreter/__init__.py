"""The symbolic bytecode interpreter: runs a frame's bytecode over ``Value``s.

``tracer.py`` holds the interpreter state and main loop; each ``ops_*.py``
module handles one family of opcodes (variables, operators, calls,
containers, control flow).  To find where an opcode is handled, grep for
``@handles("OPNAME"``.
"""
from .tracer import CellBox, TraceContext, Tracer

__all__ = ["Tracer", "TraceContext", "CellBox"]
