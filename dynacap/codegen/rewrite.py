"""Build the rewritten code object for a fully captured frame.

The rewritten code has the original's arguments, free variables, name,
file and first line, so that the C hook can run it in place of the
original (same argument slots) and tracebacks still point at user code.
Its body: call the compiled graph with the graph inputs (reloaded from
their sources), keep the outputs in a local, replay Python side effects in
program order, rebuild the return value, return.

Side effects and the values rebuilt after them:

* A source denotes its object as the frame started.  Before the replay,
  every later-read source that reads inside an object a side effect writes
  (an item of a written list/dict, an attribute name assigned, a global
  assigned) is loaded into a local (``Emitter.snapshot_sources``), so
  ``t = xs.pop(0); return t`` returns the popped item.
* Lists and dicts made while tracing that side effects store somewhere are
  built once (``Emitter.share``), so ``d["h"] = l`` and a later use of
  ``l`` (the return value, a resume function's argument) are one object.
"""
from __future__ import annotations

import types

from bytecode import Bytecode, CompilerFlags, Instr

from ..interpreter.tracer import SideEffect
from ..source import (AttrSource, BuiltinSource, DictEntrySource, GlobalSource, ItemSource, ModuleGlobalSource,
                      Source)
from .emitter import Emitter

_KEEP_FLAGS = CompilerFlags.VARARGS | CompilerFlags.VARKEYWORDS | CompilerFlags.NESTED


def emit_side_effects(cg: Emitter, side_effects: list[SideEffect]) -> None:
    """Replay ``side_effects`` in order (right after the graph call, before anything is rebuilt)."""
    if not side_effects:
        return
    cg.snapshot_sources(_Writes(side_effects).touches)
    _share_stored_containers(cg, side_effects)
    for effect in side_effects:
        if effect.kind == "container":
            _emit_container_update(cg, effect.value)
            continue
        effect.value.reconstruct(cg)
        if effect.kind == "setattr":
            effect.target.reconstruct(cg)
            cg.append("STORE_ATTR", effect.name)
        elif effect.own_globals:
            cg.append("STORE_GLOBAL", effect.name)
        else:
            cg.load_const(effect.target)
            cg.load_const(effect.name)
            cg.append("STORE_SUBSCR")


class _Writes:
    """What a list of side effects writes, to tell which sources they may change."""

    def __init__(self, side_effects: list[SideEffect]):
        self.containers: set[Source] = set()
        self.attributes: set[str] = set()
        self.globals: set[str] = set()
        for effect in side_effects:
            if effect.kind == "container":
                self.containers.add(effect.value.source)
            elif effect.kind == "setattr":
                self.attributes.add(effect.name)
            else:
                self.globals.add(effect.name)

    def touches(self, source: Source) -> bool:
        """Whether ``source`` reads inside something written (itself or any object on its path)."""
        while source is not None:
            if isinstance(source, ItemSource) and source.base in self.containers:
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


def _share_stored_containers(cg: Emitter, side_effects: list[SideEffect]) -> None:
    """Build each list/dict made while tracing that a side effect stores once, for every later use."""
    from ..values.containers import DictValue, ListValue, SequenceValue

    seen: set[int] = set()

    def visit(value) -> None:
        if id(value) in seen:
            return
        seen.add(id(value))
        if isinstance(value, DictValue):
            children = value.items.values()
        elif isinstance(value, SequenceValue):
            children = value.items
        else:
            return
        for child in children:
            visit(child)
        if value.source is None and isinstance(value, (ListValue, DictValue)):
            cg.share(value)

    for effect in side_effects:
        visit(effect.value)


def _emit_container_update(cg: Emitter, container) -> None:
    """Write a mutated list's/dict's final contents into the runtime object, keeping its identity."""
    from ..values.containers import DictValue

    if isinstance(container, DictValue):
        # Build the new contents first: they may be read from the dict itself.
        container.build(cg)
        cg.append("STORE_FAST", "___new_contents")
        for method, args in ((dict.clear, ()), (dict.update, ("___new_contents",))):
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
    bc = Bytecode(prologue(original) + body)
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
    return bc.to_code()


def emit_graph_call(cg: Emitter, graph_call) -> None:
    """Call the compiled graph with its inputs (reloaded from their sources); keep the outputs.

    ``graph_call`` is None (nothing captured) or ``(compiled_fn, inputs, output_index)``.
    """
    if graph_call is None:
        return
    compiled_fn, inputs, _ = graph_call
    cg.append("PUSH_NULL")
    cg.load_const(compiled_fn)
    for graph_input in inputs:
        cg.extend(graph_input.source.emit())
    cg.append("PRECALL", len(inputs))
    cg.append("CALL", len(inputs))
    cg.append("STORE_FAST", Emitter.GRAPH_OUT)


def build_rewritten_code(original: types.CodeType, return_value, side_effects, graph_call) -> types.CodeType:
    """The code of a fully captured frame; ``graph_call`` as for ``emit_graph_call``."""
    cg = Emitter(output_index=graph_call[2] if graph_call else None, lineno=original.co_firstlineno)
    emit_graph_call(cg, graph_call)
    emit_side_effects(cg, side_effects)
    return_value.reconstruct(cg)
    cg.append("RETURN_VALUE")
    return build_code(original, cg.instructions)
