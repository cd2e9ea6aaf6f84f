"""The symbolic bytecode interpreter: runs a frame's bytecode over ``Value``s.

``tracer.py`` holds one frame's interpreter state and main loop,
``trace_context.py`` the state a trace shares across inlined frames (graph,
guards, side effects), ``call_frames.py`` how an inlined call's frame starts
(arguments bound, closure cells); each ``ops_*.py`` module handles one family
of opcodes (variables, operators, calls, containers, control flow).  To find where an opcode is handled, grep for
``@handles("OPNAME"``.
"""
from .call_frames import CellBox
from .trace_context import TraceContext
from .tracer import Tracer

# Importing the opcode families registers their handlers in ``tracer.HANDLERS``; the opcodes
# none of them handles break with the reason in ``ops_unsupported`` (imported last).
from . import ops_calls, ops_containers, ops_control, ops_exceptions, ops_match, ops_operators  # noqa: E402,F401
from . import ops_variables  # noqa: E402,F401
from . import ops_sets, ops_unsupported  # noqa: E402,F401  (set operators wrap the general ones)

__all__ = ["Tracer", "TraceContext", "CellBox"]
