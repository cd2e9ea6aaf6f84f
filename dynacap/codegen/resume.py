"""Resume functions: the rest of a frame after a graph break, as a new function.

``resume_code(original, offset, layout, live)`` copies ``original``'s
bytecode and puts a prefix in front that rebuilds the value stack from the
function's arguments (``___stack0``...), re-enters active grad-mode
``with`` blocks at their stack positions, and jumps to ``offset``.  The
exception table of the copy is kept as it is (with its stack depths), so
``with`` cleanups after the jump behave as in the original.  Live locals
arrive as the first arguments under their own names, in the original's
order (zero-argument ``super()`` reads the first local), then the stack
arguments, which the prefix deletes once pushed: the resumed frame's
``locals()`` are the original's.  Messages name these frames
``f (resumed at line N)`` (``errors.frame_name``).  Results are memoised per
(code, offset, layout, live names): a frame that breaks at the same place
again reuses the same resume code and so the same hook cache entries.

``chain_code`` builds the function that continues a break inside inlined
calls: it calls the innermost frame's resume function and feeds its result
to the next outer one's, all in one frame, so the hook captures the whole
continuation as one graph.
"""
from __future__ import annotations

import dis
import itertools
import types
import weakref

from bytecode import Bytecode, CompilerFlags, Instr, Label

from ..errors import set_frame_name
from .assemble import to_code

#: Per original code object: key -> resume code.
_CACHE: "weakref.WeakKeyDictionary[types.CodeType, dict]" = weakref.WeakKeyDictionary()

NULL = "null"
ARG = "arg"
#: An argument holding the items a ``for`` loop's iterator has left: the prefix re-makes the iterator.
ITER = "iter"


def stack_arg(i: int) -> str:
    return f"___stack{i}"


def resume_code(original: types.CodeType, offset: int, layout: tuple, live: tuple, at: bool = False) -> types.CodeType:
    """``layout``: per stack slot, bottom first, ``ARG``, ``ITER``, ``NULL`` or a grad-mode context class."""
    key = (offset, layout, live)
    per_code = _CACHE.setdefault(original, {})
    code = per_code.get(key)
    if code is None:
        code = _build_resume(original, offset, layout, live)
        per_code[key] = code
        _ENTRY[code] = _entry_offset(code)
    if at:
        _RESUME_AT.add(code)
    return code


#: Resume code -> offset of the instruction its prefix jumps to.
_ENTRY: "weakref.WeakKeyDictionary[types.CodeType, int]" = weakref.WeakKeyDictionary()
#: Resume codes that start *at* a breaking instruction (see ``breaks.plan_levels``).
_RESUME_AT: "weakref.WeakSet[types.CodeType]" = weakref.WeakSet()


#: Instructions that only prepare the ``CALL`` after them (no effect, no break of their own).
CALL_SETUP = ("KW_NAMES", "PRECALL")


def _entry_offset(code: types.CodeType) -> int:
    """The first instruction the prefix reaches that can break: its jump target, past ``CALL_SETUP``."""
    instructions = [i for i in dis.get_instructions(code) if i.opname != "EXTENDED_ARG"]
    jump = next(i for i in instructions if i.opname == "JUMP_FORWARD")
    k = next(k for k, i in enumerate(instructions) if i.offset >= jump.argval)
    while instructions[k].opname in CALL_SETUP:
        k += 1
    return instructions[k].offset


def is_entry(code: types.CodeType, offset: int) -> bool:
    """Whether ``offset`` is the first instruction that can break after the prefix's jump (see ``CALL_SETUP``)."""
    return _ENTRY.get(code) == offset


def is_resume_at(code: types.CodeType) -> bool:
    return code in _RESUME_AT


def _instruction_position(original: types.CodeType, offset: int) -> int:
    """Index among real instructions (no CACHE / EXTENDED_ARG) of the one at ``offset``."""
    from .liveness import real_offset

    offset = real_offset(original, offset)
    real = [i for i in dis.get_instructions(original) if i.opname != "EXTENDED_ARG"]
    for k, ins in enumerate(real):
        if ins.offset == offset:
            return k
    raise ValueError(f"no instruction at offset {offset} in {original.co_name}")


def _build_resume(original: types.CodeType, offset: int, layout: tuple, live: tuple) -> types.CodeType:
    bc = Bytecode.from_code(original, conserve_exception_block_stackdepth=True)
    position = _instruction_position(original, offset)
    target = Label()
    body = list(bc)
    seen = 0
    insert_at = None
    lineno = original.co_firstlineno
    for k, item in enumerate(body):
        if isinstance(item, Instr):
            if seen == position:
                insert_at = k
                lineno = item.lineno or lineno
                break
            seen += 1
    assert insert_at is not None
    body.insert(insert_at, target)

    # The stack arguments' names must not be names of the code's own: resuming a resume function
    # (whose prefix reads its ``___stack0``...) would otherwise pass two arguments of one name.
    taken = set(original.co_varnames) | set(original.co_cellvars) | set(original.co_freevars) | set(live)
    names = (n for n in (stack_arg(i) for i in itertools.count()) if n not in taken)
    stack_names = [next(names) for slot in layout if slot in (ARG, ITER)]
    prefix: list = []
    n_args = 0
    for slot in layout:
        if slot == NULL:
            prefix.append(Instr("PUSH_NULL"))
        elif slot == ARG:
            prefix.append(Instr("LOAD_FAST", stack_names[n_args]))
            n_args += 1
        elif slot == ITER:
            prefix.extend([Instr("LOAD_FAST", stack_names[n_args]), Instr("GET_ITER")])
            n_args += 1
        else:
            prefix.extend([Instr("PUSH_NULL"), Instr("LOAD_CONST", slot), Instr("PRECALL", 0), Instr("CALL", 0),
                           Instr("BEFORE_WITH"), Instr("POP_TOP")])
    # The stack arguments are consumed: the frame's locals (``locals()``, ``f_locals``) are the original's.
    prefix.extend(Instr("DELETE_FAST", name) for name in stack_names)
    prefix.append(Instr("JUMP_FORWARD", target))
    for instr in prefix:
        instr.lineno = lineno

    resume_at = next(k for k, item in enumerate(body) if isinstance(item, Instr) and item.name == "RESUME")
    body[resume_at + 1:resume_at + 1] = prefix

    # Live locals first (in the original's order): zero-argument super() reads the first local.
    argnames = list(live) + stack_names
    new = Bytecode(body)
    new.argnames = argnames
    new.argcount = len(argnames)
    new.posonlyargcount = 0
    new.kwonlyargcount = 0
    new.flags = CompilerFlags.OPTIMIZED | CompilerFlags.NEWLOCALS | (
        CompilerFlags(original.co_flags) & CompilerFlags.NESTED)
    new.cellvars = list(bc.cellvars)
    new.freevars = list(bc.freevars)
    new.name = original.co_name
    new.qualname = f"{original.co_qualname}.<resume at line {lineno}>"
    new.filename = original.co_filename
    new.first_lineno = original.co_firstlineno
    new.docstring = None
    code = to_code(new, stacksize=original.co_stacksize + 4)
    set_frame_name(code, resumed_name(original.co_name, lineno))
    return code


def resumed_name(name: str, lineno: int) -> str:
    """How messages and logs name a resume (or chain) function of ``name``."""
    return f"{name} (resumed at line {lineno})"


def chain_code(levels: list, filename: str, name: str, lineno: int) -> types.CodeType:
    """A function calling resume functions innermost first, each result feeding the next level.

    ``levels``: innermost first, ``(resume_fn, n_stack_args, live_names)``.  The chain's arguments
    are, per level, its live locals then its stack values; for every level but the innermost, the
    inner result is passed as the resume function's last stack argument.
    """
    argnames: list[str] = []
    body: list = [Instr("RESUME", 0)]
    for depth, (fn, n_stack, live) in enumerate(levels):
        own_stack = n_stack - (1 if depth > 0 else 0)
        names = [f"___l{depth}_v{i}" for i in range(len(live))] + [f"___l{depth}_s{i}" for i in range(own_stack)]
        argnames.extend(names)
        if depth > 0:
            body.append(Instr("STORE_FAST", "___result"))
        body.extend([Instr("PUSH_NULL"), Instr("LOAD_CONST", fn)])
        body.extend(Instr("LOAD_FAST", n) for n in names)
        if depth > 0:
            body.append(Instr("LOAD_FAST", "___result"))
        nargs = n_stack + len(live)
        body.extend([Instr("PRECALL", nargs), Instr("CALL", nargs)])
    body.append(Instr("RETURN_VALUE"))
    for instr in body:
        instr.lineno = lineno
    bc = Bytecode(body)
    bc.argnames = argnames
    bc.argcount = len(argnames)
    bc.flags = CompilerFlags.OPTIMIZED | CompilerFlags.NEWLOCALS
    bc.name = name
    bc.qualname = f"{name}.<resume chain at line {lineno}>"
    bc.filename = filename
    bc.first_lineno = lineno
    bc.docstring = None
    code = to_code(bc)
    # It stands for the resumed frames it calls, which user stacks show themselves.
    set_frame_name(code, resumed_name(name, lineno), hidden=True)
    return code




_FUNCTIONS: dict = {}


def function_for(code: types.CodeType, f_globals: dict) -> types.FunctionType:
    """The (memoised) function object of a resume code without free variables."""
    key = (code, id(f_globals))
    fn = _FUNCTIONS.get(key)
    if fn is None:
        fn = types.FunctionType(code, f_globals, code.co_name)
        _FUNCTIONS[key] = fn
    return fn


def clear() -> None:
    _CACHE.clear()
    _FUNCTIONS.clear()
    _ENTRY.clear()
    _RESUME_AT.clear()
