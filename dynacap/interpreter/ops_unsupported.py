"""The opcodes dynacap does not capture, each with the reason the user reads when it breaks there.

Every CPython 3.11 opcode is either handled by an ``ops_*`` family or listed
in ``BREAK_REASONS`` (``tests/test_opcodes.py`` checks ``dis.opmap`` against
both).  An opcode listed here breaks the graph: the instruction runs eagerly
(or, where it cannot run alone, the frame does), so the result is eager's.
Most are never reached by a captured frame (the hook skips module bodies,
exec'd code, coroutines and generators); they are listed so that reaching one
anyway is a clean break, never an internal error.

This module is imported last: an opcode a family handles is never replaced.
"""
from __future__ import annotations

from ..errors import GraphBreak
from .tracer import HANDLERS

_ASYNC = "async code ({what}) is not captured: coroutines and async generators run eagerly"

#: opname -> the reason a user reads when capture stops there.
BREAK_REASONS = {
    "CACHE": "an inline cache entry (CACHE) is not an instruction",
    "PRINT_EXPR": "an interactive-mode expression statement (PRINT_EXPR) is not captured",
    "IMPORT_STAR": "`from module import *` (IMPORT_STAR) is not captured",
    "GET_AWAITABLE": _ASYNC.format(what="`await`"),
    "GET_AITER": _ASYNC.format(what="`async for`"),
    "GET_ANEXT": _ASYNC.format(what="`async for`"),
    "END_ASYNC_FOR": _ASYNC.format(what="`async for`"),
    "BEFORE_ASYNC_WITH": _ASYNC.format(what="`async with`"),
    "ASYNC_GEN_WRAP": _ASYNC.format(what="`yield` in an async generator"),
}

# ``class`` statements and the names of their bodies (registered before the refusals below).
from . import ops_classes  # noqa: E402,F401


def refuse(tx, ins):
    """The handler of every opcode in ``BREAK_REASONS``."""
    raise GraphBreak(BREAK_REASONS[ins.opname])


for _opname in BREAK_REASONS:
    HANDLERS.setdefault(_opname, refuse)
