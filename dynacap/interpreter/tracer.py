"""``Tracer``: the interpreter state of one frame and its main loop.

The state is exactly what a CPython 3.11 frame holds, in symbolic form:
the value stack, the locals (by name), the cells, the instruction pointer
and the pending ``KW_NAMES``.  Because it mirrors the real frame, the code
generator can rebuild it in bytecode at any instruction (used to resume
after a graph break).  Inlined calls get a child ``Tracer`` sharing the
parent's ``TraceContext`` (graph, guards, side effects: ``trace_context``),
its frame started by ``call_frames`` (arguments bound, closure cells).

The tracer never runs user code for real and never compiles anything: it
only produces values, graph nodes, guards and side effects.
"""
from __future__ import annotations

import dis
import inspect
import linecache
import traceback
import types
import weakref
from dataclasses import dataclass

import torch

from .. import config, trace_rules
from ..errors import GraphBreak
from ..graph import GraphBuilder
from ..guards import GuardSet
from ..source import BuiltinSource, GlobalSource, ModuleGlobalSource
from ..trace_rules import Rule
from ..regions import handler_at, in_try
from ..skipfiles import is_layer_file, is_skipped_file
from ..source import LocalSource
from ..values.base import DELETED, Value
from ..values.constant import ConstantValue
from ..values.exceptions import ExceptionValue, PythonError, python_error
from ..values.grad_mode import WithBlock
from ..values.library import call_by_rule
from ..values.wrap import wrap
from .call_frames import CellBox, bind_arguments, closure_cells
from .trace_context import SideEffect, TraceContext

#: Code flags of functions whose call makes a coroutine or an async generator (never inlined).
_ASYNC_FLAGS = inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE

#: The opcodes that close a loop's iteration.
_BACKWARD_JUMPS = frozenset(dis.opmap[name] for name in ("JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT"))

#: opname -> handler(tracer, instruction); filled by the ``ops_*`` modules.
HANDLERS: dict = {}


def handles(*opnames):
    def register(fn):
        for name in opnames:
            assert name in dis.opmap, name
            HANDLERS[name] = fn
        return fn

    return register


@dataclass(slots=True)  # one per instruction traced: slots and positional construction halve its cost
class Checkpoint:
    stack: list
    locals: dict
    kw_names: tuple | None
    blocks: list
    nodes: int
    side_effects: int
    mutations: int
    grad_enabled: bool


@dataclass
class FrameAtBreak:
    """One frame of the call chain at a graph break: its tracer, its state before the instruction."""

    tracer: "Tracer"
    checkpoint: Checkpoint
    instruction: dis.Instruction



class CodeFacts:
    """What the tracer reads of a code object at every call and instruction, worked out once per code object:
    its instructions (``dis``), the index of each offset, each instruction's handler, and which offsets a
    ``try`` handler protects (``regions.in_try``, filled as they are asked)."""

    __slots__ = ("instructions", "index_of_offset", "handlers", "in_try")

    def __init__(self, code: types.CodeType):
        self.instructions = list(dis.get_instructions(code))
        self.index_of_offset = {ins.offset: i for i, ins in enumerate(self.instructions)}
        # Every ops_* module registered its opcodes when the package was imported, before any trace.
        self.handlers = [HANDLERS.get(ins.opname) for ins in self.instructions]
        self.in_try: dict[int, bool] = {}


#: id(code) -> (weak reference to the code, its ``CodeFacts``): every inlined call of a function would
#: disassemble it again.  By identity, as code objects compare equal by value.
_FACTS: dict[int, tuple] = {}


def facts_of(code: types.CodeType) -> CodeFacts:
    """``code``'s ``CodeFacts``, made once per code object."""
    key = id(code)
    entry = _FACTS.get(key)
    if entry is None or entry[0]() is not code:
        entry = _FACTS[key] = (weakref.ref(code, lambda _, key=key: _FACTS.pop(key, None)), CodeFacts(code))
    return entry[1]


class Tracer:
    def __init__(self, code: types.CodeType, ctx: TraceContext, f_globals: dict, parent: "Tracer | None" = None):
        self.code = code
        self.ctx = ctx
        self.f_globals = f_globals
        self.parent = parent
        self.depth = 0 if parent is None else parent.depth + 1
        self.facts = facts = facts_of(code)
        self.instructions, self.index_of_offset = facts.instructions, facts.index_of_offset
        self.stack: list[Value] = []
        self.locals: dict[str, Value] = {}
        self.cells: dict[str, CellBox] = {}
        self.ip = 0
        self.kw_names: tuple | None = None
        self.current: dis.Instruction | None = None
        self.return_value: Value | None = None
        #: Root frame only: the frame's arguments and closure contents, wrapped on first read.
        self.frame_values: dict = {}
        self.deleted: set[str] = set()
        self.blocks: list[WithBlock] = []
        #: Set by CALL while it evaluates the callee, so an inlined callee knows its result is the CALL's.
        self.calling = False
        #: Whether this (inlined) frame's return value is directly the parent's CALL result.
        self.direct_call = False
        #: For an inlined generator: the values it yielded so far (None for other frames).  A
        #: generator's frame runs only when its consumer pulls (``values.iterators.GeneratorValue``),
        #: so a break inside it is never resumed inside it (``codegen.breaks.plan_levels``).
        self.yielded: list[Value] | None = None
        #: For an inlined generator driven by a ``with`` block (``contextlib.contextmanager``): its ``yield``
        #: may sit in a try block, and what it raises reaches the block's ``__exit__``.
        self.managed = False
        #: For an inlined generator: set while a ``for`` loop pulls it (what it raises may reach the loop's
        #: handlers, ``values.iterators.GeneratorValue.next_item``).
        self.pulled_by_loop = False
        #: For an inlined generator: its ``values.iterators.GeneratorValue``.
        self.generator = None
        #: Backward jumps taken in this frame: loop iterations unrolled (``config.max_unroll``).
        self.iterations = 0

    # -- shared state -----------------------------------------------------------
    @property
    def graph(self) -> GraphBuilder:
        return self.ctx.graph

    @property
    def guards(self) -> GuardSet:
        return self.ctx.guards

    @property
    def is_root(self) -> bool:
        return self.parent is None

    # -- stack ------------------------------------------------------------------------
    def push(self, value: Value) -> None:
        assert isinstance(value, Value), value
        self.stack.append(value)

    def pop(self) -> Value:
        return self.stack.pop()

    def popn(self, n: int) -> list[Value]:
        if n == 0:
            return []
        values = self.stack[-n:]
        del self.stack[-n:]
        return values

    # -- locals ------------------------------------------------------------------------
    def read_local(self, name: str) -> Value:
        """The local ``name`` (wrapped from the frame on its first read in the root frame)."""
        if name in self.locals:
            return self.locals[name]
        if name.startswith(".") and name[1:].isdigit() and f"implicit{name[1:]}" in self.locals:
            # A comprehension's iterator argument `.0`: inspect.signature (which binds the arguments
            # of inlined calls) names it `implicit0`.
            return self.locals[f"implicit{name[1:]}"]
        if self.is_root and name in self.frame_values and name not in self.deleted:
            value = wrap(self, self.frame_values[name], LocalSource(name))
            self.locals[name] = value
            return value
        raise python_error(UnboundLocalError, f"cannot access local variable '{name}' where it is not associated with "
                                              "a value",
                           reason=f"local variable {name!r} is read before assignment (UnboundLocalError at run time)")

    # -- main loop ---------------------------------------------------------------------
    def run(self) -> Value:
        """Interpret until ``RETURN_VALUE``; raises ``GraphBreak`` (with the user stack) otherwise."""
        handled = self.ctx.exc_info
        step = self.step
        try:
            while self.return_value is None:
                step()
        except GraphBreak as e:
            if not e.user_stack:
                e.user_stack = self.user_stack()
            # A break inside one of its handlers leaves the frame (a caller may go on: speculation).
            self.ctx.exc_info = handled
            if self.is_root and self.ctx.unfinished_handlers():
                e.frames = []  # no resume: the generator would never be closed; the frame runs eagerly
            raise
        return self.return_value

    def step(self) -> None:
        ip = self.ip
        instruction = self.instructions[ip]
        self.current = instruction
        ctx = self.ctx
        # The state before the instruction (``checkpoint()``), made a ``Checkpoint`` only if it raises; an empty
        # stack or block list is only copied then.
        stack, blocks = self.stack, self.blocks
        saved_stack = list(stack) if stack else None
        saved_locals = dict(self.locals)
        saved_blocks = list(blocks) if blocks else None
        kw_names, nodes, side_effects = self.kw_names, len(ctx.graph.created), len(ctx.side_effects)
        mutations, grad_enabled = ctx.mutations, torch.is_grad_enabled()
        self.ip = ip + 1
        ctx.instructions_run += 1
        outer, ctx.running = ctx.running, self
        try:
            if instruction.opcode in _BACKWARD_JUMPS:
                self.iterations += 1
                if self.iterations > config.max_unroll:
                    raise GraphBreak(f"a loop in {self.code.co_name} runs more than config.max_unroll="
                                     f"{config.max_unroll} iterations while capturing (a very long or endless loop)")
            if ctx.instructions_run > config.max_instructions:
                raise GraphBreak(f"the captured code runs more than config.max_instructions={config.max_instructions} "
                                 "bytecode instructions while capturing (a very long computation in Python)")
            handler = self.facts.handlers[ip]
            if handler is None:
                raise GraphBreak(f"the bytecode instruction {instruction.opname} is not supported yet")
            handler(self, instruction)
        except GraphBreak as e:
            checkpoint = Checkpoint(saved_stack or [], saved_locals, kw_names, saved_blocks or [], nodes,
                                    side_effects, mutations, grad_enabled)
            if isinstance(e, PythonError):
                if self.catch(e, checkpoint):
                    return
                if self.yielded is not None:
                    e = self._leaving_generator(e)
                e.frames.insert(0, FrameAtBreak(self, checkpoint, instruction))
                raise e
            # Outer frames are prepended as the break propagates out of inlined calls.
            e.frames.insert(0, FrameAtBreak(self, checkpoint, instruction))
            raise
        finally:
            ctx.running = outer

    def _leaving_generator(self, error: PythonError) -> GraphBreak:
        """What a generator's frame raises, as its consumer sees it.

        A ``for`` loop or a ``with`` block (``contextlib.contextmanager``) sees the exception; a
        ``StopIteration`` becomes ``RuntimeError("generator raised StopIteration")`` (PEP 479) for a
        loop, a break for a ``with``.  Any other consumer: a break.
        """
        exception = error.exception
        stop = issubclass(exception.cls, StopIteration)
        if self.pulled_by_loop and stop:
            converted = ExceptionValue(RuntimeError, [ConstantValue("generator raised StopIteration")])
            converted.set_cause(exception)
            converted.context = exception
            return PythonError(converted, reraise=True)  # its context is set, as CPython's
        if self.pulled_by_loop or self.managed and not stop:
            return error
        plain = GraphBreak(error.reason)
        plain.frames, plain.user_stack = error.frames, error.user_stack
        return plain

    def catch(self, error: PythonError, checkpoint: Checkpoint) -> bool:
        """Unwind to the handler of this frame's exception table that protects the current instruction.

        As CPython does: the value stack is cut to the entry's depth, the instruction's offset is
        pushed where the entry keeps it (``lasti``), then the exception, and the handler runs next.
        False when no entry protects the instruction: the exception leaves the frame.
        """
        exception = error.exception
        if not error.reraise:
            # Raised here: its __context__ is the exception being handled (once, where it is raised).
            exc_info = self.ctx.exc_info
            exception.context = exc_info if exc_info is not exception else ConstantValue(None)
            exception.traceback = object()  # a raise gives it a new traceback (a re-raise keeps it)
            error.reraise = True
        entry = handler_at(self.code, self.current.offset)
        if entry is None:
            return False
        exception.raised = True  # a handler holds it now: it has a traceback, it is not rebuilt after the graph
        self.stack = list(checkpoint.stack[: entry.depth])
        if entry.lasti:
            self.push(ConstantValue(self.current.offset))
        self.push(exception)
        self.kw_names = None
        self.calling = False
        self.blocks = list(checkpoint.blocks)
        self.jump_to(entry.target)
        return True

    def inside_try(self) -> bool:
        """Whether a handler of this frame or of a caller protects the current instruction.

        A ``try`` handler, or a ``with`` block whose ``__exit__`` eager would run with the exception
        (its effects, or swallowing it): its exit value is on the frame's stack.
        """
        tracer = self
        while tracer is not None:
            current = tracer.current
            if current is not None:
                known = tracer.facts.in_try
                protected = known.get(current.offset)
                if protected is None:
                    protected = known[current.offset] = in_try(tracer.code, current.offset)
                if protected:
                    return True
            for value in tracer.stack:
                if getattr(value, "handles_exceptions", False):
                    return True
            tracer = tracer.parent
        return False

    def checkpoint(self) -> "Checkpoint":
        """The state before an instruction: enough to resume the frame at it after a break."""
        ctx = self.ctx
        return Checkpoint(list(self.stack), dict(self.locals), self.kw_names, list(self.blocks), len(ctx.graph.created),
                          len(ctx.side_effects), ctx.mutations, torch.is_grad_enabled())

    def jump_to(self, offset: int) -> None:
        self.ip = self.index_of_offset[offset]

    def user_stack(self) -> list[traceback.FrameSummary]:
        """The user's stack at the current instruction, outermost frame first."""
        frames = []
        tracer = self
        while tracer is not None:
            frames.append(tracer.frame_summary())
            tracer = tracer.parent
        return list(reversed(frames))

    def frame_summary(self) -> traceback.FrameSummary:
        lineno = self.code.co_firstlineno
        if self.current is not None and self.current.positions and self.current.positions.lineno:
            lineno = self.current.positions.lineno
        line = linecache.getline(self.code.co_filename, lineno).strip()
        return traceback.FrameSummary(self.code.co_filename, lineno, self.code.co_name, line=line or None)

    # -- variables ------------------------------------------------------------------------
    def load_global(self, name: str) -> Value:
        ctx = self.ctx
        override = ctx.global_overrides.get((id(self.f_globals), name))
        if override is DELETED:
            # Missing because the trace deleted it: no guard (it is there when the frame starts).
            if name in ctx.f_builtins:
                return wrap(self, ctx.f_builtins[name], None)
            raise GraphBreak(f"name {name!r} is not defined (NameError at run time)")
        if override is not None:
            return override
        if name in self.f_globals:
            if self.ctx.library_depth and is_layer_file(self.code.co_filename):
                # torch's own module globals (F, init...) are fixed: no guard needed.
                return wrap(self, self.f_globals[name], None)
            return wrap(self, self.f_globals[name], self.global_source(name))
        builtins_dict = ctx.f_builtins
        if name in builtins_dict:
            if self.f_globals is ctx.f_globals:
                self.guards.add("NOT_PRESENT", None, f"{name!r} not in G")
            else:
                self.guards.add("NOT_PRESENT", None, f"{name!r} not in {{g}}",
                                f"{name!r} not in globals of {self.f_globals.get('__name__')}", g=self.f_globals)
            return wrap(self, builtins_dict[name], BuiltinSource(name) if self.f_globals is ctx.f_globals else None)
        raise GraphBreak(f"name {name!r} is not defined (NameError at run time)")

    def global_source(self, name: str):
        if self.f_globals is self.ctx.f_globals:
            return GlobalSource(name)
        module_name = self.f_globals.get("__name__", "module")
        return ModuleGlobalSource(str(module_name), name, self.f_globals)

    def store_global(self, name: str, value: Value) -> None:
        self.ctx.global_overrides[(id(self.f_globals), name)] = value
        self.ctx.side_effects.append(SideEffect("store_global", self.f_globals, name, value,
                                                self.f_globals is self.ctx.f_globals))

    def delete_global(self, name: str) -> None:
        self.ctx.global_overrides[(id(self.f_globals), name)] = DELETED
        self.ctx.side_effects.append(SideEffect("delete_global", self.f_globals, name, DELETED,
                                                self.f_globals is self.ctx.f_globals))

    def attribute_override(self, obj, name: str) -> Value | None:
        return self.ctx.attribute_overrides.get((id(obj), name))

    def record_setattr(self, target: Value, name: str, value: Value, slot: bool = False) -> None:
        """``target.name = value`` on an object from the frame: later reads see ``value``, and the store is
        replayed after the graph.  ``slot``: ``name`` is a ``__slots__`` member of its class."""
        if target.source is None:
            raise GraphBreak(f"assigning `.{name}` on {target.describe()} created while capturing")
        if not slot:
            _refuse_store_without_dict(target, name)
        self.ctx.attribute_overrides[(id(_identity_of(target)), name)] = value
        self.ctx.side_effects.append(SideEffect("setattr", target, name, value))

    def record_tensor_setattr(self, target: Value, name: str, value: Value) -> None:
        """``t.name = v`` on a tensor (made by the graph or read from the frame) whose class stores it in the
        instance dict (``values.tensor.python_attribute``): replayed on the real tensor after the graph
        (the graph's output or the frame's tensor, one object either way); later reads in the trace see
        ``value`` (keyed by the tensor's value: one per tensor in a trace)."""
        self.ctx.attribute_overrides[(id(target), name)] = value
        self.ctx.side_effects.append(SideEffect("setattr", target, name, value))

    def record_delattr(self, target: Value, name: str) -> None:
        """``del target.name``: later reads see it missing, and the deletion is replayed after the graph."""
        if target.source is None:
            raise GraphBreak(f"deleting `.{name}` on {target.describe()} created while capturing")
        self.ctx.attribute_overrides[(id(_identity_of(target)), name)] = DELETED
        self.ctx.side_effects.append(SideEffect("delattr", target, name, DELETED))

    def record_call(self, fn, args: list[Value]) -> None:
        """``fn(*args)`` (a constant callable, arguments known now) called after the graph, in program order."""
        from ..values.containers import TupleValue

        self.ctx.side_effects.append(SideEffect("call", fn, "", TupleValue(args)))

    def record_iterator_advance(self, iterator: Value) -> None:
        """An iterator from the frame is advanced: its state (``iterator.written_state()`` once the trace is
        done) is written back after the graph."""
        self.ctx.side_effects.append(SideEffect("iterator_state", iterator, "", iterator))

    def record_container_mutation(self, container: Value) -> None:
        """A list/dict from the frame changed: its final contents are written back after the graph."""
        self.ctx.side_effects.append(SideEffect("container", container, "", container))

    def module_tensor(self, tensor, hint: str, source):
        """A parameter or buffer: held by the graph, guarded by identity."""
        key = id(tensor)
        cached = self.ctx.module_tensors.get(key)
        if cached is not None:
            return cached
        if source is not None:
            self.guards.id_match(source, tensor)
        value = self.graph.attr_tensor(tensor, hint, source)
        self.ctx.module_tensors[key] = value
        return value

    def guard_module_state(self, module_value) -> None:
        if module_value.source is not None:
            from ..source import AttrSource

            self.guards.equals_match(AttrSource(module_value.source, "training"), module_value.module.training)

    # -- calls ----------------------------------------------------------------------------
    def inline_call(self, fn_value, args: list[Value], kwargs: dict[str, Value]) -> Value:
        """Interpret a user function's bytecode in a child tracer and return its result."""
        fn = fn_value.fn
        code = fn.__code__
        if getattr(fn, "_dynacap_disabled", False):
            raise GraphBreak(f"call to {fn.__qualname__}, which is disabled by the user (dynacap.disable)")
        if getattr(fn, "_dynacap_allow_in_graph", False):
            return self.graph.call("call_function", fn, args, kwargs, fn.__qualname__)
        rule = trace_rules.rule_for_code(code)
        if rule is not None and rule.rule is not Rule.INLINE:
            return call_by_rule(self, fn_value, rule, args, kwargs)
        if rule is None and is_skipped_file(code.co_filename):
            raise GraphBreak(f"call to {fn.__qualname__}, which dynacap does not capture (skipped file)")
        if self.depth + 1 > config.inline_depth_limit:
            raise GraphBreak(f"calls nested deeper than config.inline_depth_limit={config.inline_depth_limit}")
        if code.co_flags & _ASYNC_FLAGS:
            raise GraphBreak(f"calling coroutine/async function {fn.__qualname__} is not supported")
        local_values = bind_arguments(self, fn_value, args, kwargs)
        child = Tracer(code, self.ctx, fn.__globals__, parent=self)
        child.direct_call, self.calling = self.calling, False
        child.locals.update(local_values)
        if code.co_freevars:
            child.cells.update(closure_cells(self, fn_value))
        if code.co_flags & inspect.CO_GENERATOR:
            from ..values.iterators import GeneratorValue

            # Calling it only binds the arguments: the body runs when the consumer pulls.
            child.direct_call = False
            return GeneratorValue(child, fn)
        return child.run()


def _refuse_store_without_dict(target: Value, name: str) -> None:
    """A generic store on an object without a ``__dict__`` (``__slots__`` without that name): AttributeError.

    The caller found no data descriptor (a slot) of that name on the class, so eager raises here;
    replayed after the graph, the store would raise outside the frame's handlers.
    """
    from ..values.objects import ObjectValue

    if isinstance(target, ObjectValue) and not type(target.obj).__dictoffset__:
        cls = type(target.obj)
        raise python_error(AttributeError, f"{cls.__name__!r} object has no attribute {name!r}",
                           reason=f"assigning `.{name}` on {target.describe()}, whose class has __slots__ without "
                                  f"it (AttributeError at run time)")


def _identity_of(value: Value):
    """The object a value stood for while tracing (for attribute overrides within one trace).

    A module shared across instances (guarded by structure, not identity) stands, within one trace,
    for the runtime one, as a plain object's ``obj`` does: the override is per trace, and the replay
    reloads the module through its source.
    """
    from ..values.module import ModuleValue
    from ..values.objects import ObjectValue

    if isinstance(value, ModuleValue):
        return value.module
    return value.obj if isinstance(value, ObjectValue) else value.real_object()

