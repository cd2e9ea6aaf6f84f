"""``TraceContext``: the state one root frame's trace shares with every inlined callee, and its log of side effects.

The graph being built, the guards, the Python-level side effects to replay after the graph (``SideEffect``,
in program order), the overrides later reads in the trace must see, and the rules that keep a graph that
may raise from reordering those effects (``keep_program_order``).  It holds no frame state (that is the
``Tracer``'s) and interprets nothing.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..dynamic import ShapePolicy
from ..errors import GraphBreak
from ..graph import GraphBuilder
from ..guards import GuardSet
from ..values.base import Value
from ..values.exceptions import CALLERS



@dataclass
class SideEffect:
    """A Python-level mutation to replay after the graph runs, in program order."""

    kind: str  # "setattr" | "delattr" | "store_global" | "delete_global" | "container" | "iterator_state" | "call"
    target: object  # Value (setattr) or globals dict (store_global)
    name: str
    value: Value
    #: For "store_global"/"delete_global": whether ``target`` is the root frame's own globals (``STORE_GLOBAL``).
    own_globals: bool = False


@dataclass
class TraceContext:
    """State shared by a root frame's tracer and every inlined callee."""

    f_globals: dict
    f_builtins: dict
    graph: GraphBuilder = field(default_factory=GraphBuilder)
    guards: GuardSet = field(default_factory=GuardSet)
    side_effects: list = field(default_factory=list)
    attribute_overrides: dict = field(default_factory=dict)
    global_overrides: dict = field(default_factory=dict)
    module_tensors: dict = field(default_factory=dict)
    #: id(list or dict from the frame) -> its value, so every path to it sees the same mutations.
    containers: dict = field(default_factory=dict)
    instructions_run: int = 0
    #: Bumped by every mutation of a traced list/dict (mutations cannot be rolled back).
    mutations: int = 0
    #: Grad mode when the root frame started.
    initial_grad: bool = True
    #: >0 while a built-in torch.nn layer's forward is being inlined (see values.module._inline_layer).
    library_depth: int = 0
    #: Real contexts entered for captured ``with torch.autocast()`` / ``warnings.catch_warnings()`` blocks,
    #: innermost last: left when the trace ends.
    autocasts: list = field(default_factory=list)
    #: The tracer whose instruction is running (innermost frame of the inlined chain).
    running: object = None
    #: Whether the graph holds an operation a ``try`` handler protects (kept after rollbacks: conservative).
    handled_ops: bool = False
    #: Which input sizes and ints are symbolic (``dynamic.ShapePolicy``); None: all static.
    shapes: "ShapePolicy | None" = None
    #: Sources of frame dicts read by key (``values.keyed_dicts``), learnt by an earlier attempt.
    keyed_dicts: frozenset = frozenset()
    #: The exception being handled (``sys.exception()``): ``CALLERS`` (the caller's, unknown) until a
    #: traced handler's ``PUSH_EXC_INFO`` sets an ``ExceptionValue``; ``POP_EXCEPT`` puts it back.
    exc_info: Value = CALLERS
    #: Generators of the trace that were suspended at a ``yield`` inside a try or with block.
    suspended_generators: list = field(default_factory=list)
    #: Functions made by the trace with a closure: ``id(fn)`` -> ``(fn, the tracer's cell boxes)``, for code
    #: that reaches such a function through a class made in the trace rather than the value made for it.
    made_closures: dict = field(default_factory=dict)
    #: Whether the trace's guards are kept with what it makes: False under export (an exported program has
    #: none), so nothing may be read under a guard there (the values of a small tensor: ``known_values``).
    guards_kept: bool = True

    def __post_init__(self):
        self.graph.before_node = self.keep_program_order

    def unfinished_handlers(self) -> list:
        """Generators suspended inside a try or with block now: eager runs their handler when they are closed
        or freed, which code after a graph break (where they do not exist) would never do."""
        return [g for g in self.suspended_generators if g.suspended_in_handler and not g.done]

    def keep_program_order(self, mutates: bool, raises: bool = True) -> None:
        """Called before each graph operation: break where a raising graph would skip eager's effects.

        ``raises``: whether the operation may raise when the graph runs (``graph.effects.may_raise``).
        """
        self._keep_handlers_reachable(mutates, raises)
        self._keep_side_effects_in_order(mutates, raises)

    def _keep_handlers_reachable(self, mutates: bool, raises: bool) -> None:
        """Refuse a graph operation whose failure a ``try`` handler could not see (``graph.effects``).

        A graph runs outside the frame's ``try`` blocks.  One that changes nothing
        that stays changed is rerun eagerly if it raises, so the handler runs;
        one that changes an input, parameter or buffer cannot be rerun, so it may
        not also hold operations inside a ``try`` block (of the frame or of a
        caller in the inlined chain): the graph is split there.
        """
        inside = raises and self.running is not None and self.running.inside_try()
        if inside and (mutates or self.graph.holds_mutation()) or mutates and self.handled_ops:
            raise GraphBreak("an operation inside a try block in a graph that changes an input, parameter or "
                             "buffer (in place, or a running-stat update): the graph is split there so that the "
                             "except/finally handler runs if it raises")
        self.handled_ops = self.handled_ops or inside

    def _keep_side_effects_in_order(self, mutates: bool, raises: bool) -> None:
        """Refuse a graph operation that would lose side effects if the graph raised (``graph.effects``).

        The graph runs before the side effects recorded during its trace are
        replayed.  A graph that changes nothing that stays changed is rerun
        eagerly if it raises (``codegen.rewrite``).  One that changes an input,
        parameter or buffer cannot be rerun, so no operation (any may raise)
        may follow a side effect in it: such an operation runs eagerly (a graph
        break) after the graph and the replay, and the rest of the frame
        resumes.  Side effects after its last operation are fine: if the graph
        raises, eager would not have reached them either; so are operations after
        them that cannot raise once traced (``raises`` False: their errors are
        about shapes and dtypes, which fake propagation checked), such as the
        ``F.linear`` that reads the weight a spectral-norm pre-hook assigned.
        """
        if not self.side_effects:
            return
        if mutates and raises:
            raise GraphBreak("an operation that changes an input, parameter or buffer (in place, or a running-stat "
                             "update) after a Python side effect: the graph is split there so that side effects "
                             "keep program order if it raises")
        if raises and self.graph.holds_mutation():
            raise GraphBreak("an operation after a Python side effect in a graph that changes an input, parameter "
                             "or buffer (in place, or a running-stat update): the graph is split there so that "
                             "side effects keep program order if it raises")

    def rollback(self, nodes: int, side_effects: int) -> None:
        """Forget the graph nodes and side effects recorded after those counts (an instruction that broke)."""
        self.graph.rollback(nodes)
        del self.side_effects[side_effects:]
