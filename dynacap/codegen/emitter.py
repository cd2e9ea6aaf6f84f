"""``Emitter``: an instruction list under construction, plus where graph outputs live.

Values rebuild themselves by calling ``Emitter`` methods
(``Value.reconstruct``).  A first pass with ``collecting=True`` only
records which tensors the rebuilt values need from the graph; the code
generator then makes those the graph's outputs and emits for real.

A source denotes its object as the frame started, so once side effects are
replayed a source that reads inside an object they write (``xs[0]`` after
``xs.pop(0)``) would read the wrong thing.  ``snapshot_sources`` marks the
point before the replay: from then on such a source is loaded once at that
point into a local, and every use reads the local.  The emitter never
decides what a side effect writes (the caller passes ``touches``).
"""
from __future__ import annotations

from bytecode import Instr

from ..errors import GraphBreak
from ..source import Source, SourceCode
from ..values.base import Value
from ..values.classes import is_template


_NO_ARG = object()


class Emitter:
    #: Local variable of the rewritten code that holds the graph's output tuple.
    GRAPH_OUT = "___graph_out"

    def __init__(self, collecting: bool = False, output_index: dict | None = None, lineno: int | None = None):
        self.instructions: list = []
        self.collecting = collecting
        self.needed_tensors: list = []
        self._needed_nodes: set = set()
        self.output_index = output_index or {}
        self.lineno = lineno
        #: id(value) -> local holding the one runtime object built for it (see ``share``).
        self.shared: dict[int, str] = {}
        #: Where sources read after the side effects are loaded (see ``snapshot_sources``).
        self._snapshot_at: int | None = None
        self._touches = None
        self._snapshots: dict[Source, str] = {}

    def append(self, name: str, arg=_NO_ARG) -> None:
        instr = Instr(name) if arg is _NO_ARG else Instr(name, arg)
        if self.lineno is not None:
            instr.lineno = self.lineno
        self.instructions.append(instr)

    def extend(self, instructions) -> None:
        if isinstance(instructions, SourceCode):
            self.load_source(instructions.source)
            return
        for instr in instructions:
            if self.lineno is not None:
                instr.lineno = self.lineno
            self.instructions.append(instr)

    def snapshot_sources(self, touches) -> None:
        """From here on, load every source for which ``touches(source)`` holds from a local set here.

        Called before side effects are replayed: ``touches`` says whether a
        source reads inside an object that they write.
        """
        self._snapshot_at = len(self.instructions)
        self._touches = touches

    @property
    def snapshotting(self) -> bool:
        """Whether ``snapshot_sources`` was called: sources may then be read from snapshot locals."""
        return self._touches is not None

    def load_source(self, source: Source) -> None:
        """Push the value ``source`` denoted when the frame started."""
        if self._touches is None or not self._touches(source):
            self.extend(list(source.load()))
            return
        name = self._snapshots.get(source)
        if name is None:
            name = f"___source{len(self._snapshots)}"
            self._snapshots[source] = name
            load = [*source.load(), Instr("STORE_FAST", name)]
            for instr in load:
                if self.lineno is not None:
                    instr.lineno = self.lineno
            self.instructions[self._snapshot_at:self._snapshot_at] = load
            self._snapshot_at += len(load)
        self.append("LOAD_FAST", name)

    def share(self, value) -> None:
        """Build ``value`` once into a local, so every later use is the same runtime object.

        Needed for lists/dicts made while tracing that are used in several
        places across a graph break: the eager instruction may mutate them.
        """
        if id(value) in self.shared:
            return
        value.reconstruct(self)
        if id(value) in self.shared:  # a value that builds itself once (``build_once``, new objects)
            self.append("POP_TOP")
            return
        self.keep_shared(value)

    def build_once(self, value, build) -> None:
        """Push ``value``'s one runtime object: made by ``build(self)`` the first time, then reloaded.

        For objects made while tracing (functions, modules) that must be one
        new object per run however many places hold them (``return h, h``).
        """
        if self.load_shared(value):
            return
        build(self)
        self.keep_shared(value)
        self.load_shared(value)

    def keep_shared(self, value) -> None:
        """Store the object on top of the stack as ``value``'s one runtime object (see ``load_shared``)."""
        name = f"___shared{len(self.shared)}"
        self.append("STORE_FAST", name)
        self.shared[id(value)] = name

    def load_shared(self, value) -> bool:
        name = self.shared.get(id(value))
        if name is None:
            return False
        self.append("LOAD_FAST", name)
        return True

    def load_const(self, value) -> None:
        if isinstance(value, type) and is_template(value):
            # One class for every call, its methods' closure cells empty: never a class made by the trace.
            raise GraphBreak(f"class {value.__qualname__} created in captured code cannot be rebuilt here")
        self.append("LOAD_CONST", value)

    def call(self, fn, *args) -> None:
        """Push ``fn(*args)``: ``fn`` a constant, each argument a value (rebuilt) or a constant."""
        self.append("PUSH_NULL")
        self.load_const(fn)
        for arg in args:
            if isinstance(arg, Value):
                arg.reconstruct(self)
            else:
                self.load_const(arg)
        self.append("PRECALL", len(args))
        self.append("CALL", len(args))

    def load_tensor(self, tensor_value) -> None:
        """Push a tensor: from its source if it is an input or parameter, else from the graph's outputs."""
        node = tensor_value.node
        if node.op in ("placeholder", "get_attr") and tensor_value.source is not None:
            self.extend(tensor_value.source.emit())
            return
        if self.collecting:
            if node not in self._needed_nodes:
                self._needed_nodes.add(node)
                self.needed_tensors.append(tensor_value)
            self.append("LOAD_CONST", None)
            return
        self.append("LOAD_FAST", self.GRAPH_OUT)
        self.append("LOAD_CONST", self.output_index[node])
        self.append("BINARY_SUBSCR")
