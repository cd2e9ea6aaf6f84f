"""Build the rewritten code object for a fully captured frame.

The rewritten code has the original's arguments, free variables, name,
file and first line, so that the C hook can run it in place of the
original (same argument slots) and tracebacks still point at user code.
Its body: call the compiled graph with the graph inputs (reloaded from
their sources, a prefix several of them share read once: ``_load_inputs``),
keep the outputs in a local, replay Python side effects in
program order, rebuild the return value, return.

Side effects and the values rebuilt after them:

* A source denotes its object as the frame started.  Before the replay,
  every later-read source that reads inside an object a side effect writes
  (an item of a written list/dict, an attribute name assigned, a global
  assigned) is loaded into a local (``Emitter.snapshot_sources``), so
  ``t = xs.pop(0); return t`` returns the popped item.  After a graph
  break the eager instruction may write anything, so there every source
  that reads more than a local is loaded before the replay.
* Lists and dicts made while tracing that side effects store somewhere are
  built once (``Emitter.share``), so ``d["h"] = l`` and a later use of
  ``l`` (the return value, a resume function's argument) are one object.

A graph that raises (``x[torch.tensor([5])]`` out of range) has run before
any side effect was replayed.  If the graph leaves nothing changed when it
raises (``graph.effects.graph_may_mutate``: no in-place op on an input,
parameter or buffer, no ``out=``, no running-stat update; grad-mode and
autocast switches and random ops are undone by the compiled graph's wrapper,
``modes.restoring_modes_on_error``), the frame is rerun eagerly from the
start, with its arguments, through an unhooked copy of its code
(``eager_copy``): the side effects happen in program order and the real
exception is raised from the user's line.  A ``KeyboardInterrupt`` (any
non-``Exception``) is never rerun.  A graph that may mutate is not rerun
(rerunning would mutate twice): its exception propagates as it is, and it
has no side effects to lose: the tracer lets no operation follow a side
effect in such a graph (``TraceContext.keep_program_order`` breaks the graph
there), so eager would not have reached them either.
"""
from __future__ import annotations

import dataclasses
import inspect
import types
import weakref

from bytecode import BinaryOp, Bytecode, CompilerFlags, FreeVar, Instr, Label, TryBegin, TryEnd

from .. import hook
from ..graph.effects import graph_may_mutate
from ..interpreter.trace_context import SideEffect
from ..values.frame_iterators import RANGE_ITERATOR
from ..source import (AttrSource, BuiltinSource, DictEntrySource, GlobalSource, ItemSource, KeyedItemSource, LocalSource,
                      ModuleGlobalSource, Source)
from .assemble import to_code
from .emitter import Emitter

_KEEP_FLAGS = CompilerFlags.VARARGS | CompilerFlags.VARKEYWORDS | CompilerFlags.NESTED


def emit_side_effects(cg: Emitter, side_effects: list[SideEffect], eager_code_follows: bool = True) -> None:
    """Replay ``side_effects`` in order (right after the graph call, before anything is rebuilt).

    ``eager_code_follows``: code that runs after the replay and before values
    are rebuilt (a graph break's eager instruction) may write anything, so
    every source that reads inside an object (or a global or cell) is loaded
    before the replay.  Only the side effects write otherwise (a fully
    captured frame), and only the sources they may change are.
    """
    if eager_code_follows:
        cg.snapshot_sources(_reads_inside)
    elif side_effects:
        cg.snapshot_sources(_Writes(side_effects).touches)
    share_made_containers(cg, [effect.value for effect in side_effects])
    for effect in side_effects:
        if effect.kind == "container":
            _emit_container_update(cg, effect.value)
            continue
        if effect.kind == "call":
            cg.call(effect.target, *effect.value.items)
            cg.append("POP_TOP")
            continue
        if effect.kind == "iterator_state":
            cg.call(RANGE_ITERATOR.__setstate__, effect.value, effect.value.written_state())
            cg.append("POP_TOP")
            continue
        if effect.kind == "setattr" and _has_own_setattr(effect.target):
            _emit_generic_store(cg, effect)
            continue
        deleting = effect.kind in ("delattr", "delete_global")
        if not deleting:
            effect.value.reconstruct(cg)
        if effect.kind in ("setattr", "delattr"):
            effect.target.reconstruct(cg)
            cg.append("DELETE_ATTR" if deleting else "STORE_ATTR", effect.name)
        elif effect.own_globals:
            cg.append("DELETE_GLOBAL" if deleting else "STORE_GLOBAL", effect.name)
        else:
            cg.load_const(effect.target)
            cg.load_const(effect.name)
            cg.append("DELETE_SUBSCR" if deleting else "STORE_SUBSCR")


def _has_own_setattr(target) -> bool:
    """Whether ``target``'s class has its own ``__setattr__``: a store recorded past it (``object.__setattr__``
    in the traced code) must not run it when replayed."""
    from ..values.objects import ObjectValue, lookup_hook

    return isinstance(target, ObjectValue) and lookup_hook(type(target.obj), "__setattr__") is not None


def _emit_generic_store(cg: Emitter, effect: SideEffect) -> None:
    """``object.__setattr__(target, name, value)``."""
    cg.append("PUSH_NULL")
    cg.load_const(object.__setattr__)
    effect.target.reconstruct(cg)
    cg.load_const(effect.name)
    effect.value.reconstruct(cg)
    cg.append("PRECALL", 3)
    cg.append("CALL", 3)
    cg.append("POP_TOP")


def _reads_inside(source: Source) -> bool:
    """Whether loading ``source`` reads more than a frame local."""
    return not (isinstance(source, LocalSource) and not source.is_free)


class _Writes:
    """What a list of side effects writes, to tell which sources they may change."""

    def __init__(self, side_effects: list[SideEffect]):
        self.containers: set[Source] = set()
        self.attributes: set[str] = set()
        self.globals: set[str] = set()
        for effect in side_effects:
            if effect.kind == "container":
                self.containers.add(effect.value.source)
            elif effect.kind in ("iterator_state", "call"):
                continue  # the iterator's own state, or a logging call: no source reads inside them
            elif effect.kind in ("setattr", "delattr"):
                self.attributes.add(effect.name)
            else:
                self.globals.add(effect.name)

    def touches(self, source: Source) -> bool:
        """Whether ``source`` reads inside something written (itself or any object on its path)."""
        while source is not None:
            if isinstance(source, (ItemSource, KeyedItemSource)) and source.base in self.containers:
                return True
            if isinstance(source, AttrSource) and source.name in self.attributes:
                return True
            if isinstance(source, DictEntrySource) and \
                    (source.key in self.attributes or source.dict_attr in self.attributes):
                return True
            if isinstance(source, (GlobalSource, BuiltinSource, ModuleGlobalSource)) and source.name in self.globals:
                return True
            source = source.reads_through()
        return False


def share_made_containers(cg: Emitter, values) -> None:
    """Build each list/dict/object made while tracing that ``values`` hold once, for every later use (aliasing)."""
    from ..values.containers import DictValue, DictViewValue, ListValue, SequenceValue
    from ..values.instances import NewObjectValue

    seen: set[int] = set()

    def visit(value) -> None:
        if id(value) in seen:
            return
        seen.add(id(value))
        if isinstance(value, DictViewValue):
            children = [value.dict_value]  # a view and its dict are rebuilt as one object and its view
        elif isinstance(value, DictValue):
            children = value.items.values()
        elif isinstance(value, SequenceValue):
            children = value.items
        elif isinstance(value, NewObjectValue):
            children = value.attrs.values()
        else:
            return
        for child in children:
            visit(child)
        if value.source is None and isinstance(value, (ListValue, DictValue, NewObjectValue)):
            cg.share(value)

    for value in values:
        visit(value)


def _emit_container_update(cg: Emitter, container) -> None:
    """Write a mutated list's/dict's/set's final contents into the runtime object, keeping its identity."""
    from ..values.containers import DictValue
    from ..values.deques import DequeValue
    from ..values.keyed_dicts import KeyedDictValue
    from ..values.sets import SetValue

    if isinstance(container, (KeyedDictValue, DequeValue)):
        # A keyed dict: one store per key written (the other keys are not known); a deque: clear, extend
        # (it has no slice assignment).
        container.emit_update(cg)
        return
    if isinstance(container, SetValue) and container.emit_changes(cg):
        return  # its changes replayed: its hash table ends as eager's
    if isinstance(container, (DictValue, SetValue)):
        # Build the new contents first: they may be read from the dict (set) itself.  The type's own
        # methods: ``dict.update`` on an OrderedDict would skip the order it keeps.
        kind = container.dict_type if isinstance(container, DictValue) else set
        container.build(cg)
        cg.append("STORE_FAST", "___new_contents")
        for method, args in ((kind.clear, ()), (kind.update, ("___new_contents",))):
            cg.append("PUSH_NULL")
            cg.load_const(method)
            cg.extend(container.source.emit())
            for name in args:
                cg.append("LOAD_FAST", name)
            cg.append("PRECALL", 1 + len(args))
            cg.append("CALL", 1 + len(args))
            cg.append("POP_TOP")
        return
    for item in container.items:
        item.reconstruct(cg)
    cg.append("BUILD_LIST", len(container.items))
    cg.extend(container.source.emit())
    cg.load_const(slice(None))
    cg.append("STORE_SUBSCR")


def prologue(original: types.CodeType) -> list[Instr]:
    instrs = []
    if original.co_freevars:
        instrs.append(Instr("COPY_FREE_VARS", len(original.co_freevars)))
    instrs.append(Instr("RESUME", 0))
    return instrs


def build_code(original: types.CodeType, body: list[Instr], name_suffix: str = "") -> types.CodeType:
    """A code object with ``original``'s signature and free variables and the given body."""
    bc = Bytecode(prologue(original) + body + _rerun_handlers(original, body))
    nargs = original.co_argcount + original.co_kwonlyargcount
    flags = CompilerFlags(original.co_flags)
    if flags & CompilerFlags.VARARGS:
        nargs += 1
    if flags & CompilerFlags.VARKEYWORDS:
        nargs += 1
    bc.argnames = list(original.co_varnames[:nargs])
    bc.argcount = original.co_argcount
    bc.posonlyargcount = original.co_posonlyargcount
    bc.kwonlyargcount = original.co_kwonlyargcount
    bc.flags = CompilerFlags.OPTIMIZED | CompilerFlags.NEWLOCALS | (flags & _KEEP_FLAGS)
    bc.freevars = list(original.co_freevars)
    bc.cellvars = []
    bc.name = original.co_name + name_suffix
    bc.qualname = original.co_qualname + name_suffix
    bc.filename = original.co_filename
    bc.first_lineno = original.co_firstlineno
    bc.docstring = None
    return to_code(bc)


def emit_graph_call(cg: Emitter, graph_call) -> None:
    """Call the compiled graph with its inputs (reloaded from their sources); keep the outputs.

    ``graph_call`` is None (nothing captured) or ``(compiled_fn, inputs, output_index)``.
    A graph that mutates nothing is called inside a ``try`` whose handler
    reruns the frame eagerly (added by ``build_code``, which knows the frame's code).
    """
    if graph_call is None:
        return
    compiled_fn, inputs, _ = graph_call
    try_begin = None
    if not graph_may_mutate(_graph_of(graph_call)):
        try_begin = TryBegin(_RerunLabel(cg.lineno), push_lasti=False)
        cg.instructions.append(try_begin)
    cg.append("PUSH_NULL")
    cg.load_const(compiled_fn)
    held = _load_inputs(cg, [graph_input.source for graph_input in inputs])
    cg.append("PRECALL", len(inputs))
    cg.append("CALL", len(inputs))
    if try_begin is not None:
        cg.instructions.append(TryEnd(try_begin))
    cg.append("STORE_FAST", Emitter.GRAPH_OUT)
    for name in held:  # the prefixes do not outlive the call (a child deleted later dies when eager's would)
        cg.append("DELETE_FAST", name)


class _HeldSource(Source):
    """An object the rewritten code keeps in a local: a prefix several graph inputs read through."""

    def __init__(self, name: str, held: Source):
        self.name, self.held = name, held

    def expr(self) -> str:
        return self.held.expr()

    def load(self) -> list[Instr]:
        return [Instr("LOAD_FAST", self.name)]


def _load_inputs(cg: Emitter, sources: list[Source]) -> list[str]:
    """Push the graph inputs, reading each prefix that several of them read through once; returns the
    locals that hold the prefixes.

    A model's parameters are ``self._modules['layer1']._modules['0']._parameters['weight']``
    and its siblings: loaded one by one, the shared prefixes make most of the rewritten
    code (slower to assemble and to run).  A prefix read by two or more inputs is loaded
    once into a local the first time it is needed and read from there afterwards.  The
    loads run back to back before the graph call (no side effect has been replayed and no
    user code runs between them), so a prefix denotes the same object at every read: the
    same assumption the guards make when they read each source once.  Sources are loaded
    as they are when a snapshot is active (``Emitter.load_source``).
    """
    if cg.snapshotting:
        for source in sources:
            cg.extend(source.emit())
        return []
    # Keyed by expression: equal sources have one (and it is kept on each source object, where hashing
    # a chain of frozen dataclasses walks all of it on every lookup).
    uses: dict[str, int] = {}
    for source in sources:
        base = _shared_base(source)
        while base is not None:
            uses[base.expr()] = uses.get(base.expr(), 0) + 1
            base = _shared_base(base)
    held: dict[str, str] = {}

    def load(source: Source) -> list[Instr]:
        base = _shared_base(source)
        key = base.expr() if base is not None else None
        if uses.get(key, 0) < 2:
            return list(source.load())
        name = held.get(key)
        if name is None:
            name = held[key] = f"___input_base{len(held)}"
            cg.extend(load(base) + [Instr("STORE_FAST", name)])
        return dataclasses.replace(source, base=_HeldSource(name, base)).load()

    for source in sources:
        cg.extend(load(source))
    return list(held.values())


def _shared_base(source: Source) -> Source | None:
    """The source ``source`` reads through, when that read can come from a local instead: ``source``
    is a (frozen) dataclass naming it ``base``, and the base itself reads more than a name."""
    base = getattr(source, "base", None)
    if base is None or getattr(base, "base", None) is None:
        return None
    cls = type(source)
    known = _HAS_BASE_FIELD.get(cls)
    if known is None:
        known = _HAS_BASE_FIELD[cls] = dataclasses.is_dataclass(cls) and "base" in {
            f.name for f in dataclasses.fields(cls)}
    return base if known else None


#: Source class -> whether it is a dataclass with a ``base`` field (``dataclasses.replace`` can swap it).
_HAS_BASE_FIELD: dict[type, bool] = {}


# -- rerunning a frame whose graph raised ----------------------------------------------------
class _RerunLabel(Label):
    """The handler of a graph call's ``try``: rerun the frame eagerly (see ``_rerun_handlers``)."""

    def __init__(self, lineno: int | None):
        super().__init__()
        self.lineno = lineno


def _rerun_handlers(original: types.CodeType, body: list) -> list:
    """For each graph call guarded in ``body``: catch an ``Exception``, rerun the frame eagerly, return.

    The handler leaves the ``except`` state before rerunning, so the rerun's
    own exception is not chained to the graph's.  Anything that is not an
    ``Exception`` (``KeyboardInterrupt``) propagates as it is.
    """
    handlers = []
    for item in body:
        if not (isinstance(item, TryBegin) and isinstance(item.target, _RerunLabel)):
            continue
        label, reraise = item.target, Label()
        code = [
            Instr("PUSH_EXC_INFO"),
            Instr("LOAD_CONST", Exception),
            Instr("CHECK_EXC_MATCH"),
            Instr("POP_JUMP_FORWARD_IF_FALSE", reraise),
            Instr("POP_TOP"),
            Instr("POP_EXCEPT"),
            *_eager_call(original),
            Instr("RETURN_VALUE"),
        ]
        tail = [Instr("SWAP", 2), Instr("POP_EXCEPT"), Instr("RERAISE", 0)]
        for instr in code + tail:
            if label.lineno is not None:
                instr.lineno = label.lineno
        handlers += [label, *code, reraise, *tail]
    return handlers


def _eager_call(original: types.CodeType) -> list[Instr]:
    """Call an unhooked copy of ``original`` with this frame's arguments and closure."""
    flags = original.co_flags
    names = original.co_varnames
    n_positional = original.co_argcount
    kwonly = names[n_positional:n_positional + original.co_kwonlyargcount]
    rest = n_positional + len(kwonly)
    varargs = names[rest] if flags & inspect.CO_VARARGS else None
    varkw = names[rest + (varargs is not None)] if flags & inspect.CO_VARKEYWORDS else None
    instrs = [Instr("PUSH_NULL")]
    if original.co_freevars:
        instrs += [Instr("LOAD_CLOSURE", FreeVar(name)) for name in original.co_freevars]
        instrs.append(Instr("BUILD_TUPLE", len(original.co_freevars)))
    instrs += [Instr("LOAD_CONST", eager_copy(original)),
               Instr("MAKE_FUNCTION", 0x08 if original.co_freevars else 0)]
    # The rewritten code has no cells (``build_code``): every argument slot holds the argument itself.
    instrs += [Instr("LOAD_FAST", name) for name in names[:n_positional]]
    instrs.append(Instr("BUILD_TUPLE", n_positional))
    if varargs is not None:
        instrs += [Instr("LOAD_FAST", varargs), Instr("BINARY_OP", BinaryOp.ADD)]
    for name in kwonly:
        instrs += [Instr("LOAD_CONST", name), Instr("LOAD_FAST", name)]
    instrs.append(Instr("BUILD_MAP", len(kwonly)))
    if varkw is not None:
        instrs += [Instr("LOAD_FAST", varkw), Instr("DICT_UPDATE", 1)]
    instrs.append(Instr("CALL_FUNCTION_EX", 1))
    return instrs


#: id(code) -> (weak reference to the code, its unhooked copy).
_eager_copies: dict[int, tuple] = {}
_EAGER_COPY = "dynacap: eager copy"


def eager_copy(code: types.CodeType) -> types.CodeType:
    """A copy of ``code`` the hook never intercepts (memoised per code object).

    Calls made from it are still captured: only this code is skipped.
    """
    key = id(code)
    entry = _eager_copies.get(key)
    if entry is None or entry[0]() is not code:
        # An extra unused constant makes the copy unequal to the original: code objects compare
        # by value, and sets of codes (the hook's tracked codes) must keep both.
        copy = code.replace(co_consts=code.co_consts + (_EAGER_COPY,))
        entry = (weakref.ref(code, lambda _, key=key: _eager_copies.pop(key, None)), copy)
        _eager_copies[key] = entry
    hook.skip(entry[1])  # again after a reset(), which clears skip marks
    return entry[1]


# -- does a graph mutate anything observable? (``graph.effects``) -----------------------------
def _graph_of(graph_call):
    """The ``torch.fx.Graph`` behind a graph call (None when it cannot be found)."""
    _, inputs, output_index = graph_call
    for graph_input in inputs:
        return graph_input.node.graph
    for node in output_index:
        return node.graph
    return None


def build_rewritten_code(original: types.CodeType, return_value, side_effects, graph_call) -> types.CodeType:
    """The code of a fully captured frame; ``graph_call`` as for ``emit_graph_call``."""
    cg = Emitter(output_index=graph_call[2] if graph_call else None, lineno=original.co_firstlineno)
    emit_graph_call(cg, graph_call)
    emit_side_effects(cg, side_effects, eager_code_follows=False)
    share_made_containers(cg, [return_value])  # `return (l, l)` hands back one list twice
    return_value.reconstruct(cg)
    cg.append("RETURN_VALUE")
    return build_code(original, cg.instructions)
