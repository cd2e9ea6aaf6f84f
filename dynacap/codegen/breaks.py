"""Rewritten code for a frame that hit a graph break.

The code calls the graph captured so far, replays side effects, runs the
one unsupported instruction eagerly (with its operands rebuilt from the
graph outputs and constants), and returns the result of a *resume
function* that holds the rest of the frame.  When the break happened
inside inlined calls, the break is resumed *inside* them: a chain function
continues the innermost frame, then each caller in turn (see
``resume.chain_code``), so the rest of all of them becomes one frame and
one graph.  As a last resort the resume function starts *at* the
unsupported instruction, so that it runs under the frame's own exception
table (breaks inside ``try`` or unknown ``with`` blocks), and calls that
read their frame (``locals()``, ``sys._getframe()``) start a resume
function too, so they see the user's frame.  ``plan_levels``
decides where the break can be resumed; ``BreakCodegen`` emits the code.
This module never traces.
"""
from __future__ import annotations

import builtins
import functools
import inspect
import sys
import types
import warnings
from dataclasses import dataclass

import torch
from bytecode import UNSET, Bytecode, FreeVar, Instr, Label, TryBegin, TryEnd

from .. import dynamic
from ..errors import GraphBreak
from ..skipfiles import is_skipped_file
from ..interpreter.tracer import FrameAtBreak
from ..source import LocalSource
from ..values.base import NullValue
from ..values.containers import IteratorValue, SizeValue, TupleValue
from ..values.frame_iterators import FrameRangeIterator
from ..values.symbolic import SymNumberValue
from ..values.tensor import TensorValue
from ..values.autocast import AutocastExitValue
from ..values.grad_mode import GradExitValue
from ..values.live_iterators import LiveIteratorValue
from . import resume
from .emitter import Emitter
from ..regions import regions
from .liveness import live_at, real_offset
from .rewrite import build_code, emit_graph_call, emit_side_effects, share_made_containers

_BINARY_LIKE = {"BINARY_OP", "COMPARE_OP", "IS_OP", "CONTAINS_OP", "BINARY_SUBSCR"}
_UNARY_LIKE = {"LOAD_ATTR", "UNARY_NEGATIVE", "UNARY_POSITIVE", "UNARY_INVERT", "UNARY_NOT"}
_BRANCHES = {"POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_TRUE",
             "POP_JUMP_BACKWARD_IF_FALSE", "POP_JUMP_FORWARD_IF_NONE", "POP_JUMP_FORWARD_IF_NOT_NONE",
             "POP_JUMP_BACKWARD_IF_NONE", "POP_JUMP_BACKWARD_IF_NOT_NONE", "JUMP_IF_TRUE_OR_POP",
             "JUMP_IF_FALSE_OR_POP"}


def operand_count(ins) -> int | None:
    """How many stack items the eager instruction consumes (None: cannot be run on its own)."""
    name, arg = ins.opname, ins.arg
    if name == "CALL":
        return arg + 2
    if name == "CALL_FUNCTION_EX":
        return 3 + (arg & 1)
    if name in _BINARY_LIKE or name in ("STORE_ATTR", "DELETE_SUBSCR", "IMPORT_NAME"):
        return 2
    if name == "STORE_SUBSCR":
        return 3
    if name in _UNARY_LIKE or name in ("LOAD_METHOD", "UNPACK_SEQUENCE", "UNPACK_EX"):
        return 1
    if name in ("LOAD_GLOBAL", "LOAD_ASSERTION_ERROR"):
        return 0
    if name in ("BUILD_TUPLE", "BUILD_LIST", "BUILD_STRING", "BUILD_SLICE", "RAISE_VARARGS"):
        return arg
    if name == "BUILD_MAP":
        return 2 * arg
    if name == "BUILD_CONST_KEY_MAP":
        return arg + 1
    if name == "FORMAT_VALUE":
        return 2 if arg & 0x04 else 1
    if name in _BRANCHES:
        return 1
    return None


def result_layout(ins) -> list[str]:
    """Per pushed item: ``ARG`` (a real value) or ``NULL`` (a 3.11 NULL we re-create in the resume)."""
    name, arg = ins.opname, ins.arg
    if name in ("STORE_ATTR", "STORE_SUBSCR", "DELETE_SUBSCR", "RAISE_VARARGS"):
        return []
    if name == "LOAD_METHOD":
        return [resume.NULL, resume.ARG]
    if name == "LOAD_GLOBAL":
        return [resume.NULL, resume.ARG] if arg & 1 else [resume.ARG]
    if name == "UNPACK_SEQUENCE":
        return [resume.ARG] * arg
    if name == "UNPACK_EX":
        return [resume.ARG] * ((arg & 0xFF) + (arg >> 8) + 1)
    return [resume.ARG]


#: Most iterations left in an unrolled ``for`` loop that a break inside it may be resumed for.
#: Each later iteration's break resumes one call deeper (and adds a graph), so this bounds the
#: nesting; longer loops keep the graph before the break and run the rest eagerly, which is
#: faster than many small graphs (seen on element-wise Python loops in real models).
MAX_RESUMED_ITERATIONS = 4


def loops_block_resume(frame: FrameAtBreak) -> str | None:
    """Why the loops around the break forbid resuming there (None if they do not).

    Resuming inside a loop makes the next iteration's break resume one call
    deeper.  That is bounded only for ``for`` loops whose iterator is known
    (unrolled): each remaining iteration is at most one more level.  A
    ``while`` loop could nest without bound.
    """
    import dis

    code, offset = frame.tracer.code, frame.instruction.offset
    by_offset = {i.offset: i for i in dis.get_instructions(code)}
    headers = {real_offset(code, i.argval) for i in by_offset.values()
               if "BACKWARD" in i.opname and i.offset >= offset and i.argval <= offset}
    if not headers:
        return None
    if any(by_offset[h].opname != "FOR_ITER" for h in headers):
        return "inside a while loop (each iteration would resume one call deeper)"
    iterators = [v for v in frame.checkpoint.stack if isinstance(v, IteratorValue)]
    if any(isinstance(v, LiveIteratorValue) for v in iterators):
        # The resumed loop would iterate a copy of the items left, blind to changes made later.
        return "inside a loop over a list, dict or set (changes to it after the break must reach the loop)"
    if len(iterators) < len(headers):
        return "inside a loop over an iterator that is not known at capture time"
    # Each iteration left of an outer loop runs the inner loop again, one call deeper per iteration:
    # nested loops multiply (an inner loop counted as its current iteration and those left, which a
    # resume function's iterator, holding only the items left, still knows).
    remaining, body = 0, 1
    for it in reversed(iterators):  # innermost first
        left = len(it.items) - it.position
        remaining += left * body
        body *= left + 1
    if remaining > MAX_RESUMED_ITERATIONS:
        return f"inside a loop with {remaining} iterations left (more than {MAX_RESUMED_ITERATIONS})"
    return None


def resumable_at(frame: FrameAtBreak, eager: bool) -> str | None:
    """Why the frame cannot be resumed at its instruction (None if it can)."""
    ins = frame.instruction
    if eager and operand_count(ins) is None:
        return f"{ins.opname} cannot run on its own"
    why = loops_block_resume(frame)
    if why is not None:
        return why
    tries, withs = regions(frame.tracer.code, ins.offset)
    if tries:
        return "inside a try block"
    if withs != len(frame.checkpoint.blocks):
        return "inside a with block on an unsupported context manager"
    n_operands = operand_count(ins) or 0
    stack = frame.checkpoint.stack
    if any(isinstance(v, GradExitValue) for v in stack[len(stack) - n_operands:]):
        return "the instruction uses a with-block's __exit__"
    return None


#: Callables that read the locals of the frame calling them, with how many positional arguments
#: they do so (None: always).  ``eval(src, g)`` uses ``g`` for both namespaces: it reads no frame.
_FRAME_READERS = ((builtins.locals, None), (builtins.vars, 0), (builtins.dir, 0), (builtins.eval, 1),
                  (builtins.exec, 1), (builtins.super, 0), (sys._getframe, None), (inspect.currentframe, None))


def _called(frame: FrameAtBreak):
    """``(callee, positional argument count, keyword names)`` of a breaking ``CALL``, else None."""
    ins = frame.instruction
    stack = frame.checkpoint.stack
    if ins.opname != "CALL" or len(stack) < ins.arg + 2:
        return None
    kw_names = frame.checkpoint.kw_names or ()
    function, self_or_callable = stack[-ins.arg - 2], stack[-ins.arg - 1]
    if isinstance(function, NullValue):
        callee, n_positional = self_or_callable, ins.arg - len(kw_names)
    else:  # a method called with its self
        callee, n_positional = function, ins.arg - len(kw_names) + 1
    try:
        fn = callee.real_object()
    except GraphBreak:
        # A function guarded by its code rather than its identity (one passed on a resume's stack).
        fn = getattr(callee, "fn", None)
    return fn, n_positional, kw_names


def reads_frame(frame: FrameAtBreak) -> bool:
    """Whether the breaking instruction is a call that reads the frame running it.

    Such a call must run in a real frame of the code (the original or a resume function),
    never in rewritten code, whose locals and line are not the user's.
    """
    called = _called(frame)
    if called is None:
        return False
    fn, n_positional, kw_names = called
    code = getattr(fn, "__code__", None)
    for reader, reads_with in _FRAME_READERS:
        if fn is reader or (code is not None and code is getattr(reader, "__code__", None)):
            return reads_with is None or (n_positional == reads_with and not kw_names)
    return False


#: Callables that read the frames calling them (file, line, module globals), ``stacklevel`` frames up.
_CALLER_READERS = (warnings.warn,)


def reads_callers(frame: FrameAtBreak) -> bool:
    """Whether the breaking instruction is a call that reads the frames that called it (``warnings.warn``).

    Inside an inlined call it must run from the outermost frame's call, so that the callee's real frame,
    captured on its own, is what it reads.
    """
    called = _called(frame)
    return called is not None and any(called[0] is reader for reader in _CALLER_READERS)


def _iterators(frame: FrameAtBreak) -> set[int]:
    """ids of the known-item iterators a frame holds at its checkpoint (stack and locals)."""
    values = [*frame.checkpoint.stack, *frame.checkpoint.locals.values()]
    return {id(v) for v in values if isinstance(v, IteratorValue)}


def _advanced_by_callees(frames: list[FrameAtBreak]) -> list[bool]:
    """Per frame: whether a frame it called holds one of its iterators.

    Such a callee (a comprehension given the caller's iterator, ``next(it)`` on an argument) may
    have advanced it after the caller's checkpoint; the iterator's position is then not the one
    the caller's resume would need, so that frame is not resumed.
    """
    deeper: set[int] = set()
    result = []
    for frame in reversed(frames):
        mine = _iterators(frame)
        result.append(bool(mine & deeper))
        deeper |= mine
    return list(reversed(result))


def plan_levels(frames: list[FrameAtBreak]) -> list[tuple[int, bool]]:
    """Where the break may be resumed, best first: ``(level, at)`` pairs.

    ``at=False``: run the instruction eagerly in the rewritten code and resume
    after it (at that depth of the call chain).  ``at=True`` (the outermost
    frame only, the last resort): resume *at* the instruction, so the rest of
    the frame, the instruction included, runs in a resume function under the
    frame's own exception table; that function then runs eagerly (its first
    instruction breaks again).  This keeps the graph before a break inside a
    ``try`` block, an unknown ``with`` block or a ``while`` loop.
    """
    levels = []
    advanced = _advanced_by_callees(frames)
    callers_read = reads_callers(frames[-1])
    for j in range(len(frames) - 1, -1, -1):
        chain = frames[: j + 1]
        if callers_read and j > 0:
            continue  # run from the outermost frame, so that the frames it reads are the user's
        if any(advanced[: j + 1]):
            continue
        if any(f.tracer.yielded is not None for f in chain):
            continue  # a generator's frame cannot be resumed
        if any(is_skipped_file(f.tracer.code.co_filename) for f in chain):
            continue  # nor can torch's own code (a layer's forward inlined from user code)
        if resumable_at(chain[-1], eager=True) is not None:
            continue
        if j == len(frames) - 1 and reads_frame(chain[-1]):
            continue  # resumed *at* the call instead, so that it runs in the frame it reads
        if any(resumable_at(f, eager=False) is not None for f in chain[:-1]):
            continue
        if j > 0:
            if chain[-1].instruction.opname == "RAISE_VARARGS":
                # Raising from generated code would hide the callee's frame in the traceback:
                # let the call run eagerly so the real frames raise.
                continue
            if any(f.instruction.opname not in ("CALL", "CALL_FUNCTION_EX") for f in chain[:-1]):
                continue
            if not all(chain[i + 1].tracer.direct_call for i in range(j)):
                continue
            if any(f.checkpoint.blocks or f.tracer.code.co_cellvars or f.tracer.code.co_freevars for f in chain):
                continue
        levels.append((j, False))
    root = frames[0]
    if root.tracer.yielded is None and not advanced[0] and not resume.is_entry(root.tracer.code, root.instruction.offset) \
            and not resume.is_resume_at(root.tracer.code):
        levels.append((0, True))
    return levels


@dataclass
class Level:
    """One frame's part of the resume: which slots are arguments, which values fill them."""

    frame: FrameAtBreak
    layout: list  # per stack slot after the instruction: ARG / NULL / grad-mode class
    stack_values: list  # values of the ARG slots that survive the instruction (bottom first)
    n_results: int  # results of the eager instruction (innermost level only), placed after stack_values
    live: tuple[str, ...]
    offset: int


def _frame_level(frame: FrameAtBreak, keep: int, result_slots: list, resume_offset: int) -> Level:
    layout, values = [], []
    for v in frame.checkpoint.stack[:keep]:
        if isinstance(v, NullValue):
            layout.append(resume.NULL)
        elif isinstance(v, GradExitValue):
            layout.append(v.ctx.ctx_class)
        elif isinstance(v, AutocastExitValue):
            layout.append(v.factory())
        elif isinstance(v, IteratorValue) and not isinstance(v, (LiveIteratorValue, FrameRangeIterator)):
            # Passed as a tuple of the items left; the resume's prefix turns it back into an
            # iterator, which its trace unrolls again.
            layout.append(resume.ITER)
            values.append(TupleValue(v.items[v.position:]))
        else:
            layout.append(resume.ARG)
            values.append(v)
    layout.extend(result_slots)
    tracer = frame.tracer
    code = tracer.code
    names = live_at(code, resume_offset) - set(code.co_freevars)
    if "__class__" in code.co_freevars and code.co_argcount:
        # Zero-argument super() reads the frame's first local: the resume keeps it first.
        names.add(code.co_varnames[0])
    available = set(frame.checkpoint.locals) | (set(tracer.frame_values) - tracer.deleted if tracer.is_root else set())
    # A cell still empty at the break (first assigned later, in a branch or loop) is not passed:
    # the resume's MAKE_CELL makes it empty again, as it is in the original frame.
    available |= {n for n, box in tracer.cells.items()
                  if n in tracer.code.co_cellvars and n in names and box.get(tracer) is not None}
    # In the original's local order, so the resume's first local is the original's first argument.
    order = list(dict.fromkeys(code.co_varnames + code.co_cellvars))
    live = tuple(n for n in order if n in names and n in available)
    if not all(n.isidentifier() for n in live):
        # e.g. pytest's rewritten asserts use locals named "@py_assert1": they cannot be parameters.
        raise GraphBreak("a live local variable's name is not an identifier; it cannot be passed on")
    return Level(frame, layout, values, sum(1 for s in result_slots if s == resume.ARG), live, resume_offset)


def _local_value(level: Level, name: str):
    """The value of a live local at the break (None: an argument never read while tracing)."""
    tracer = level.frame.tracer
    value = level.frame.checkpoint.locals.get(name)
    if value is None and name in tracer.cells:
        value = tracer.cells[name].get(tracer)
    return value


def _inherit_symbolic_inputs(code: types.CodeType, levels: list, n_results: int) -> None:
    """Arguments that are symbolic here start symbolic in the resume (or chain) code (``dynamic.inherit``)."""
    values = []
    for depth, level in enumerate(levels):  # the argument order of resume.resume_code / chain_code
        values += [_local_value(level, name) for name in level.live] + list(level.stack_values)
        if depth == 0:
            values += [None] * n_results
    for name, value in zip(code.co_varnames[:code.co_argcount], values):
        if isinstance(value, TensorValue) and any(isinstance(d, torch.SymInt) for d in value.fake.shape):
            dynamic.inherit(code, f"L[{name!r}]",
                            tuple(dynamic.DYNAMIC if isinstance(d, torch.SymInt) else d for d in value.fake.shape))
        elif isinstance(value, SymNumberValue) and isinstance(value.fake, torch.SymInt):
            dynamic.inherit(code, f"L[{name!r}]", dynamic.DYNAMIC)
        elif isinstance(value, SizeValue):
            for i, item in enumerate(value.items):
                if isinstance(item, SymNumberValue):
                    dynamic.inherit(code, f"L[{name!r}][{i}]", dynamic.DYNAMIC)


def local_value_emit(cg: Emitter, level: Level, name: str) -> None:
    value = _local_value(level, name)
    if value is None:
        # An argument of the root frame never read while tracing: reload it as it is.
        cg.extend(LocalSource(name).emit())
        return
    value.reconstruct(cg)


class BreakCodegen:
    """Emit the rewritten code for a break resumed at level ``j`` of ``frames``."""

    def __init__(self, original: types.CodeType, frames: list[FrameAtBreak], initial_grad: bool, at: bool = False):
        self.original = original
        self.frames = frames
        self.inner = frames[-1]
        self.initial_grad = initial_grad
        self.grad_at_break = frames[-1].checkpoint.grad_enabled
        #: Resume *at* the instruction (it runs in the resume function) instead of after it.
        self.at = at

    # -- the pieces ------------------------------------------------------------------
    @functools.cached_property
    def outcomes(self):
        """Per control-flow outcome of the eager instruction: (jump?, innermost Level, outer Levels)."""
        ins = self.inner.instruction
        if self.at:
            stack = self.inner.checkpoint.stack
            return [(None, _frame_level(self.inner, len(stack), [], self._at_offset(self.inner)), [])]
        if ins.opname == "RAISE_VARARGS":
            # Nothing resumes after it (it may be the code's last instruction): no level holds anything.
            return [(None, Level(self.inner, [], [], 0, (), ins.offset), [])]
        n = operand_count(ins)
        keep = len(self.inner.checkpoint.stack) - n
        outcomes = [(None, result_layout(ins), self._next_offset(self.inner))]
        if ins.opname in _BRANCHES:
            kept = [resume.ARG] if ins.opname.startswith("JUMP_IF") else []
            outcomes = [(False, [], self._next_offset(self.inner)), (True, kept, ins.argval)]
        result = []
        for jump, slots, offset in outcomes:
            inner = _frame_level(self.inner, keep, slots, offset)
            outers = []
            for frame in reversed(self.frames[:-1]):
                consumed = operand_count(frame.instruction)
                keep_outer = len(frame.checkpoint.stack) - consumed
                outers.append(_frame_level(frame, keep_outer, [resume.ARG], self._next_offset(frame)))
            result.append((jump, inner, outers))
        return result

    @staticmethod
    def _at_offset(frame: FrameAtBreak) -> int:
        """Where a resume *at* the instruction starts: a ``CALL``'s pending ``KW_NAMES`` runs again.

        ``KW_NAMES`` sets frame state that only the next ``CALL`` reads (not the stack), so
        jumping straight to the ``CALL`` would pass keyword arguments as positional ones.
        """
        tracer = frame.tracer
        index = tracer.index_of_offset[frame.instruction.offset]
        if frame.checkpoint.kw_names:
            while index > 0 and tracer.instructions[index - 1].opname in resume.CALL_SETUP:
                index -= 1
        return tracer.instructions[index].offset

    @staticmethod
    def _next_offset(frame: FrameAtBreak) -> int:
        tracer = frame.tracer
        index = tracer.index_of_offset[frame.instruction.offset]
        return tracer.instructions[index + 1].offset

    def operands(self):
        if self.at:
            return []
        stack = self.inner.checkpoint.stack
        return stack[len(stack) - operand_count(self.inner.instruction):]

    def emit_values(self, cg: Emitter) -> None:
        """Everything rebuilt from the graph (used by the collecting pass as well)."""
        self.share_containers(cg)
        for v in self.operands():
            v.reconstruct(cg)
        for _, inner, outers in self.outcomes:
            for level in [inner, *outers]:
                for v in level.stack_values:
                    v.reconstruct(cg)
                for name in level.live:
                    local_value_emit(cg, level, name)

    def share_containers(self, cg: Emitter) -> None:
        """Build each list/dict/object made while tracing once, before the eager instruction can mutate it."""
        roots = list(self.operands())
        for _, inner, outers in self.outcomes:
            for level in [inner, *outers]:
                roots.extend(level.stack_values)
                # Cells included: a list a closure holds is the one the eager instruction changes.
                roots.extend(v for name in level.live if (v := _local_value(level, name)) is not None)
        share_made_containers(cg, roots)

    # -- the code --------------------------------------------------------------------------
    def build(self, side_effects, graph_call) -> types.CodeType:
        lineno = self._lineno()
        cg = Emitter(output_index=graph_call[2] if graph_call else None, lineno=lineno)
        emit_graph_call(cg, graph_call)
        emit_side_effects(cg, side_effects)
        self.share_containers(cg)
        if self.at:
            self._emit_resume_call(cg, self.outcomes[0], switch_grad=False)
            return build_code(self.original, cg.instructions)
        switch_grad = self.grad_at_break != self.initial_grad
        if switch_grad:
            self._set_grad(cg, self.grad_at_break)
        for v in self.operands():
            v.reconstruct(cg)
        handler = Label()
        try_begin = TryBegin(handler, push_lasti=True, stack_depth=UNSET) if switch_grad else None
        if try_begin is not None:
            cg.instructions.append(try_begin)
        branches = self.outcomes
        ins = self.inner.instruction
        if ins.opname in _BRANCHES:
            jump_label = Label()
            cg.append(ins.opname.replace("BACKWARD", "FORWARD"), jump_label)
            if try_begin is not None:
                cg.instructions.append(TryEnd(try_begin))
            shared_before = dict(cg.shared)
            self._emit_resume_call(cg, branches[0], switch_grad)
            cg.instructions.append(jump_label)
            # The other outcome's code never ran on this path: what it built first is built here again.
            cg.shared = shared_before
            self._emit_resume_call(cg, branches[1], switch_grad)
        else:
            self._emit_eager(cg, ins)
            if try_begin is not None:
                cg.instructions.append(TryEnd(try_begin))
            if ins.opname == "RAISE_VARARGS":
                cg.append("LOAD_CONST", None)
                cg.append("RETURN_VALUE")
            else:
                self._emit_resume_call(cg, branches[0], switch_grad)
        if switch_grad:
            cg.instructions.append(handler)
            self._set_grad(cg, self.initial_grad)
            cg.append("RERAISE", 1)
        return build_code(self.original, cg.instructions)

    def _lineno(self) -> int:
        frame = self.frames[0]
        positions = frame.instruction.positions
        return positions.lineno if positions and positions.lineno else self.original.co_firstlineno

    def _emit_eager(self, cg: Emitter, ins) -> None:
        name = ins.opname
        if name == "CALL":
            kw_names = self.inner.checkpoint.kw_names
            if kw_names:
                cg.append("KW_NAMES", tuple(kw_names))
            cg.append("PRECALL", ins.arg)
            cg.append("CALL", ins.arg)
        elif name == "LOAD_METHOD":
            cg.append("LOAD_ATTR", ins.argval)
        elif name == "LOAD_GLOBAL":
            cg.append("LOAD_GLOBAL", (False, ins.argval))
        else:
            cg.extend([_abstract_instruction(self.inner.tracer.code, ins)])

    def _emit_resume_call(self, cg: Emitter, branch, switch_grad: bool) -> None:
        _, inner, outers = branch
        temps = [f"___result{i}" for i in range(inner.n_results)]
        for t in reversed(temps):
            cg.append("STORE_FAST", t)
        if switch_grad:
            self._set_grad(cg, self.initial_grad)
        levels = [inner, *outers]
        fns = [self._resume_function(level) for level in levels]
        cg.append("PUSH_NULL")
        if len(levels) == 1:
            self._load_function(cg, fns[0], levels[0])
        else:
            chain_levels = [(fn, sum(1 for s in lv.layout if s in (resume.ARG, resume.ITER)), lv.live)
                            for fn, lv in zip(fns, levels)]
            chain = resume.chain_code(chain_levels, self.original.co_filename, self.original.co_name,
                                      cg.lineno or self.original.co_firstlineno)
            cg.load_const(types.FunctionType(chain, self.frames[0].tracer.f_globals))
        callee = fns[0] if len(levels) == 1 else chain
        _inherit_symbolic_inputs(callee if isinstance(callee, types.CodeType) else callee.__code__,
                                 levels, len(temps))
        nargs = 0
        for depth, level in enumerate(levels):  # the argument order of resume.resume_code / chain_code
            for name in level.live:
                local_value_emit(cg, level, name)
                nargs += 1
            for v in level.stack_values:
                v.reconstruct(cg)
                nargs += 1
            if depth == 0:
                for t in temps:
                    cg.append("LOAD_FAST", t)
                    nargs += 1
        cg.append("PRECALL", nargs)
        cg.append("CALL", nargs)
        cg.append("RETURN_VALUE")

    def _resume_function(self, level: Level):
        code = resume.resume_code(level.frame.tracer.code, level.offset, tuple(level.layout), level.live,
                                  at=self.at)
        if code.co_freevars:
            return code
        return resume.function_for(code, level.frame.tracer.f_globals)

    def _load_function(self, cg: Emitter, fn, level: Level) -> None:
        if isinstance(fn, types.CodeType):
            for name in fn.co_freevars:
                cg.append("LOAD_CLOSURE", FreeVar(name))
            cg.append("BUILD_TUPLE", len(fn.co_freevars))
            cg.load_const(fn)
            cg.append("MAKE_FUNCTION", 0x08)
        else:
            cg.load_const(fn)

    @staticmethod
    def _set_grad(cg: Emitter, mode: bool) -> None:
        cg.append("PUSH_NULL")
        cg.load_const(torch._C._set_grad_enabled)
        cg.load_const(mode)
        cg.append("PRECALL", 1)
        cg.append("CALL", 1)
        cg.append("POP_TOP")


def _abstract_instruction(code: types.CodeType, ins) -> Instr:
    """The ``bytecode`` form of one instruction of ``code`` (names and constants resolved)."""
    position = resume._instruction_position(code, ins.offset)
    seen = 0
    for item in Bytecode.from_code(code):
        if isinstance(item, Instr):
            if seen == position:
                return Instr(item.name, item.arg) if item.require_arg() else Instr(item.name)
            seen += 1
    raise GraphBreak(f"instruction at offset {ins.offset} not found")
