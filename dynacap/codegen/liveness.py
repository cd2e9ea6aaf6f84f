"""Which local variables are live (may be read before being written) at an instruction.

A standard backward dataflow over the instruction graph of one code
object, including edges into exception handlers.  Used to pass only live
locals to a resume function.  Code that may read its own frame
(``locals()``, ``eval``, ``sys._getframe()``...) reads every local at each
call, so a resumed frame holds the same locals as the original.  Pure
analysis of bytecode: no values here.
"""
from __future__ import annotations

import dis
import functools
import types

from ..regions import exception_table

_LOADS = {"LOAD_FAST", "DELETE_FAST", "LOAD_CLOSURE", "LOAD_DEREF", "LOAD_CLASSDEREF", "DELETE_DEREF"}
_STORES = {"STORE_FAST", "STORE_DEREF"}
_CALLS = {"CALL", "CALL_FUNCTION_EX"}
#: Names whose use in a code object means a call in it may read the frame's locals.
FRAME_READER_NAMES = frozenset({"locals", "vars", "dir", "eval", "exec", "_getframe", "currentframe", "f_locals"})
_NO_FALLTHROUGH = {"RETURN_VALUE", "RAISE_VARARGS", "RERAISE", "JUMP_FORWARD", "JUMP_BACKWARD",
                   "JUMP_BACKWARD_NO_INTERRUPT"}


def real_offset(code: types.CodeType, offset: int) -> int:
    """The offset of the instruction that runs at ``offset``: past any ``EXTENDED_ARG`` prefix.

    Jumps (and so loop headers and resume points) may target the ``EXTENDED_ARG``
    in front of an instruction with a large argument.
    """
    for ins in dis.get_instructions(code):
        if ins.offset >= offset and ins.opname != "EXTENDED_ARG":
            return ins.offset
    return offset


@functools.lru_cache(maxsize=512)
def _analysis(code: types.CodeType):
    everything = list(dis.get_instructions(code))
    instructions = [i for i in everything if i.opname != "EXTENDED_ARG"]
    index = {ins.offset: k for k, ins in enumerate(instructions)}
    for ins in reversed(everything):  # an EXTENDED_ARG stands for the instruction after it
        if ins.opname == "EXTENDED_ARG":
            index[ins.offset] = index[ins.offset + 2]
    table = exception_table(code)
    successors: list[list[int]] = []
    for k, ins in enumerate(instructions):
        succ = []
        if ins.opname not in _NO_FALLTHROUGH and k + 1 < len(instructions):
            succ.append(k + 1)
        if ins.opcode in dis.hasjrel or ins.opcode in dis.hasjabs:
            if ins.argval in index:
                succ.append(index[ins.argval])
        for entry in table:
            if entry.start <= ins.offset < entry.end:
                succ.append(index[entry.target])
        successors.append(succ)
    uses = [{ins.argval} if ins.opname in _LOADS else set() for ins in instructions]
    if reads_frame(code):
        every_local = set(code.co_varnames) | set(code.co_cellvars)
        for k, ins in enumerate(instructions):
            if ins.opname in _CALLS:
                uses[k] |= every_local
    defs = [{ins.argval} if ins.opname in _STORES else set() for ins in instructions]
    live_in = [set() for _ in instructions]
    changed = True
    while changed:
        changed = False
        for k in range(len(instructions) - 1, -1, -1):
            out = set()
            for s in successors[k]:
                out |= live_in[s]
            new = uses[k] | (out - defs[k])
            if new != live_in[k]:
                live_in[k] = new
                changed = True
    return index, live_in


def reads_frame(code: types.CodeType) -> bool:
    """Whether a call in ``code`` may read the locals of its frame (by the names it uses)."""
    return not FRAME_READER_NAMES.isdisjoint(code.co_names)


def live_at(code: types.CodeType, offset: int) -> set[str]:
    """Names live on entry to the instruction at ``offset``."""
    index, live_in = _analysis(code)
    return set(live_in[index[offset]])

