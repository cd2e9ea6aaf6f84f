"""The assembler of dynacap's generated code: instruction lists (``bytecode.Bytecode``) to code objects.

``to_code(bytecode)`` returns exactly what ``bytecode.to_code()`` returns (every
``co_*`` field), faster for the code dynacap generates.  ``Bytecode.to_code()``
builds a control-flow graph to find the stack size and each ``try`` region's
stack depth (the depth the handler unwinds to), then flattens the graph back into
an instruction list: half of the ~15 ms a convnext capture spends assembling its
~1,500 instructions.  The code generated here (a graph call inside a ``try``,
loads and stores, a return, the handlers that rerun the frame) only jumps forward,
so one forward pass finds the same depths: the depth at a label is the one every
earlier edge (fall-through, forward jump) brings to it, and a handler's is the
lowest depth inside its ``try`` region plus the exception (and the offset with
``push_lasti``), which is what the graph pass records (``cfg.py``:
``_StackSizeComputer``).  Per-instruction effects are bytecode's own
(``Instr.pre_and_post_stack_effect``), so the two agree by construction.

It must not guess: anything the pass does not model exactly (a backward jump, a
label reached at two depths, a jump or a return inside a ``try`` region, nested or
shared handlers, unreachable code, a stack underflow) goes to bytecode's own pass.
``DYNACAP_CHECK_ASSEMBLY=1`` assembles every code both ways and raises on any
difference (the test suite's cross-check).
"""
from __future__ import annotations

import os
import sys
import types

from bytecode import Bytecode, CompilerFlags, Instr, Label, SetLineno, TryBegin, TryEnd

#: The pass models CPython 3.11's bytecode (generators start with one item on the stack; no 3.12 opcodes).
_MODELLED = sys.version_info[:2] == (3, 11)
_STARTS_WITH_VALUE = CompilerFlags.GENERATOR | CompilerFlags.COROUTINE | CompilerFlags.ASYNC_GENERATOR
CHECK = os.environ.get("DYNACAP_CHECK_ASSEMBLY") == "1"


def to_code(bytecode: Bytecode) -> types.CodeType:
    """``bytecode.to_code()``, with the stack depths from one forward pass where it models the code exactly."""
    if CHECK:
        return checked_to_code(bytecode)
    return _to_code(bytecode)


def _to_code(bytecode: Bytecode) -> types.CodeType:
    depths = stack_depths(bytecode) if _MODELLED else None
    if depths is None:
        return bytecode.to_code()
    stacksize, try_depths = depths
    for try_begin, depth in try_depths.items():
        try_begin.stack_depth = depth
    return bytecode.to_code(stacksize=stacksize, compute_exception_stack_depths=False)


def stack_depths(bytecode: Bytecode) -> tuple[int, dict[TryBegin, int]] | None:
    """The stack size and each ``TryBegin``'s depth, or None where the code is not straight enough to be sure.

    Mirrors ``ControlFlowGraph.compute_stacksize`` for code whose edges all go
    forward and agree on each label's depth: sizes are counted after each
    instruction (its pre- and post-effect together), a taken jump counts its own
    effect, a ``try`` region's depth is the lowest size seen from its ``TryBegin``
    to its ``TryEnd``, and its handler starts one item (two with ``push_lasti``)
    above that.
    """
    depth = 1 if bytecode.flags & _STARTS_WITH_VALUE else 0
    max_depth = 0
    reachable = True
    seen: set[Label] = set()
    #: Label -> the depth the jumps to it bring (all must agree).
    jumped_to: dict[Label, int] = {}
    #: Handler label -> the depth it starts at (from its ``try`` region, which comes first).
    handlers: dict[Label, int] = {}
    try_depths: dict[TryBegin, int] = {}
    open_try: TryBegin | None = None
    lowest = 0
    for item in bytecode:
        if isinstance(item, Instr):
            if not reachable:
                return None  # dead code: bytecode's pass skips it and gives its regions a made-up depth
            if item.has_jump():
                target = item.arg
                if open_try is not None or target in seen:
                    return None
                pre, post = item.pre_and_post_stack_effect(jump=True)
                if depth + pre < 0:
                    return None
                taken = depth + pre + post
                if jumped_to.setdefault(target, taken) != taken:
                    return None
                if taken > max_depth:
                    max_depth = taken
                if item.is_uncond_jump():
                    reachable = False
                    continue
            pre, post = item.pre_and_post_stack_effect(jump=False)
            depth += pre
            if depth < 0:
                return None
            depth += post
            if depth > max_depth:
                max_depth = depth
            if open_try is not None:
                if item.is_final():
                    return None
                if depth < lowest:
                    lowest = depth
            elif item.is_final():
                reachable = False
        elif isinstance(item, Label):
            if open_try is not None:
                return None
            seen.add(item)
            arrivals = [depth] if reachable else []
            if item in jumped_to:
                arrivals.append(jumped_to.pop(item))
            if item in handlers:
                if arrivals:
                    return None  # a handler also reached by a jump or by falling into it
                depth = handlers.pop(item)
                max_depth = max(max_depth, depth)
                reachable = True
            elif arrivals:
                if arrivals[0] != arrivals[-1]:
                    return None
                depth = arrivals[0]
                reachable = True
        elif isinstance(item, TryBegin):
            target = item.target
            if not reachable or open_try is not None or target in seen or target in handlers:
                return None
            open_try, lowest = item, depth
        elif isinstance(item, TryEnd):
            if not reachable or item.entry is not open_try:
                return None
            try_depths[open_try] = lowest
            handlers[open_try.target] = lowest + 1 + bool(open_try.push_lasti)
            open_try = None
        elif not isinstance(item, SetLineno):
            return None
    if open_try is not None or jumped_to or handlers:
        return None
    return max_depth, try_depths


_FIELDS = ("co_argcount", "co_posonlyargcount", "co_kwonlyargcount", "co_nlocals", "co_stacksize", "co_flags",
           "co_code", "co_names", "co_varnames", "co_freevars", "co_cellvars", "co_filename", "co_name",
           "co_qualname", "co_firstlineno", "co_linetable", "co_exceptiontable")


def checked_to_code(bytecode: Bytecode) -> types.CodeType:
    """``to_code`` compared with ``bytecode.to_code()`` field by field (constants by identity); raises on a difference."""
    expected = bytecode.to_code()  # first: ours sets the ``TryBegin`` depths on the instructions
    code = _to_code(bytecode)
    differ = [name for name in _FIELDS if getattr(code, name) != getattr(expected, name)]
    if len(code.co_consts) != len(expected.co_consts) or \
            any(a is not b for a, b in zip(code.co_consts, expected.co_consts)):
        differ.append("co_consts")
    if differ:
        raise AssertionError(f"dynacap assembler: {code.co_qualname} differs from bytecode's in {', '.join(differ)}")
    return code
