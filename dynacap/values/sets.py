"""``SetValue``: a set or frozenset made while capturing (literals, comprehensions, ``set()``, operators).

The members live in a real Python set of *keys*, and every operation is
the real set operation on it, so membership, which of two equal members
survives (``{1} | {True}``), ``pop()`` and the iteration order are CPython's
own: the key set went through the same insertions and removals as the
runtime set will.  A constant member is its own key.  A member that CPython
hashes by identity (a tensor, a module, a function, a tuple holding one) is
a ``_Member`` key, equal only to the key of the same object (a value whose
runtime object is not known, a module guarded by its class only, is a break); its runtime
hash is its ``id``, unknown while capturing, so once such a member has been
in a set (or in a set it was computed from) the set's iteration order is
unknown: iterating it (with more than one member) or ``pop()`` breaks, while
``len``, ``in``, the methods and operators stay exact.  (A tensor member and
a constant are taken to be unequal: CPython compares them only on equal
64-bit hashes.)  Members whose hash or equality is their class's own code,
NaNs (their membership depends on object identity) and unhashable values
are graph breaks.

A set of constants read from the frame (``wrap``) keys a copy of itself and
is guarded by what the code reads: its length, the answer of an ``in``, or,
for anything else, its members in their order and its table
(``set_tables.signature``).  A copy drops the dummies removals left and the
finger ``pop()`` left, so only a frame set whose copy has its very table
(``table_known``) may be popped, or changed and then iterated.  A changed
frame set is written back after the graph by replaying the changes on it
(the same calls with the same constant operands, so its table ends as
eager's), or else by refilling it where that gives eager's table.  A set made
while capturing is rebuilt after the graph as a new set of its members, once
per run however many places hold it (``Emitter.build_once``); where that new
set would have another table than the traced one (removals, colliding
hashes) the rebuild is a graph break.  This module emits no graph nodes.
"""
from __future__ import annotations

import math
import operator
import sys

from ..errors import GraphBreak
from .base import Value
from .constant import ConstantValue
from .methods import MethodOfValue
from .iterators import is_lazy
from .set_tables import Replay, rebuilt_as_now, rebuild_plan, refilled, replay_all, same_table, signature


class _Member:
    """The key of a member hashed by identity: equal to another key of the same object only."""

    __slots__ = ("token", "value")

    def __init__(self, token, value: Value):
        self.token = token
        self.value = value

    def __hash__(self):
        return hash(self.token)

    def __eq__(self, other):
        return type(other) is _Member and self.token == other.token


def _type_name(value: Value) -> str:
    try:
        return value.python_type().__name__
    except GraphBreak:
        return value.describe()


def _has_nan(obj) -> bool:
    if type(obj) is float:
        return math.isnan(obj)
    if type(obj) is complex:
        return math.isnan(obj.real) or math.isnan(obj.imag)
    if type(obj) in (tuple, frozenset):
        return any(_has_nan(x) for x in obj)
    return False


def key_of(value: Value, tx=None):
    """The key standing for ``value`` as a set member (raises ``GraphBreak`` where CPython would raise).

    With the tracer ``tx``, a user object whose class has a Python ``__hash__`` is a ``TracedKey``
    (``protocols.hashed_key``): hashed by it now, compared by its traced ``==`` when the real set asks."""
    from .containers import DictValue, ListValue, SequenceValue
    from .tensor import TensorValue

    if isinstance(value, TensorValue):
        return _Member(("tensor", value.node), value)
    if isinstance(value, (ListValue, DictValue)) or isinstance(value, SetValue) and not value.frozen:
        raise GraphBreak(f"unhashable type: '{_type_name(value)}' (TypeError at run time)")
    if isinstance(value, SetValue):
        return value.frozen_key()
    if value.is_constant():
        constant = value.as_constant()
        try:
            hash(constant)
        except TypeError as e:
            raise GraphBreak(f"{e} (TypeError at run time)") from None
        if _has_nan(constant):
            raise GraphBreak("a NaN as a set member (its membership depends on which float object it is)")
        return constant
    if isinstance(value, SequenceValue) and issubclass(value.python_type(), tuple):
        # A tuple hashes and compares by its items, whatever its (tuple) class.
        return _Member(("tuple", tuple(key_of(item, tx) for item in value.items)), value)
    if tx is not None:
        from .protocols import hashed_key

        traced = hashed_key(tx, value)
        if traced is not None:
            return traced
    return _Member(("object", id(_identity(value))), value)


def _identity(value: Value):
    """The runtime object a member hashed by identity stands for (kept alive by the value)."""
    from .functions import UserFunctionValue
    from .objects import class_lookup

    if isinstance(value, UserFunctionValue) and value.source is None:
        return value  # made while tracing: one runtime function per traced one
    try:
        obj = value.real_object()
    except GraphBreak:
        raise GraphBreak(f"{value.describe()} as a set member (its hash is not known at capture time)") from None
    cls = type(obj)
    if class_lookup(cls, "__hash__") is not object.__hash__ or class_lookup(cls, "__eq__") is not object.__eq__:
        raise GraphBreak(f"{value.describe()} as a set member: its class has its own __hash__/__eq__")
    return obj


def lookup_key(item: Value, tx=None):
    """The key ``in``/``discard``/``remove`` look up: a set is looked up as the frozenset of its members."""
    if isinstance(item, SetValue) and not item.frozen:
        return SetValue(frozenset(item.keys)).frozen_key()  # reading item.keys guards a frame set
    return key_of(item, tx)


def _value_of(key) -> Value:
    from .protocols import key_value

    return key.value if type(key) is _Member else key_value(key)


def _holds_members(keys) -> bool:
    return any(type(k) is _Member for k in keys)


def _all_constant(keys) -> bool:
    """Whether the keys are the members themselves (no key stands for a tensor or an object)."""
    from .protocols import holds_traced_keys

    return not _holds_members(keys) and not holds_traced_keys(keys)


def is_set_like(value: Value) -> bool:
    """A ``SetValue`` or a constant set/frozenset (``x in {1, 2}`` loads a frozenset constant)."""
    return isinstance(value, SetValue) or value.is_constant() and type(value.as_constant()) in (set, frozenset)


class SetValue(Value):
    """A set (or frozenset) whose members are ``Value``s, computed on a real set of their keys."""

    def __init__(self, keys: set | frozenset, order_known: bool = True, source=None, origin: "Replay | None" = None):
        self._keys = keys
        #: False once a member hashed by identity has been in this set or one it was computed from.
        self.order_known = order_known and not _holds_members(keys)
        #: Whether the key set's table is the runtime set's (``set_tables``): then ``pop()`` and changes followed
        #: by iteration go as eager's.  Only a copy of a frame set can iterate alike and still differ.
        self.table_known = self.order_known
        self.source = source
        self.mutated = False
        #: A set from the frame not guarded member for member yet: (guards, members in order, table signature).
        self._unguarded = None
        #: The call that made this set, and those that changed it since, to replay after the graph (``Replay``);
        #: None where one cannot be replayed.
        self.origin = Replay(set, ()) if origin is None and type(keys) is set and not keys else origin
        self.changes = []
        #: Changes so far: a set operand of a change is replayed only if it is still as it was then.
        self.version = 0

    @staticmethod
    def from_frame(tx, obj: set | frozenset, source) -> "SetValue":
        """A set of constants read from the frame (``wrap`` guards its type; the rest as it is read).

        The keys are a copy: what copying, ``|`` and friends see of the runtime set.  If the copy
        iterates otherwise than the set (a table with removals), the order is taken as unknown.
        ``len``, truth and ``in`` with a constant guard only their answer; anything else reads
        ``keys``, which guards the members in their order and the table size (equal sets may
        iterate differently: ``{9, 1}``, ``{1, 9}``).
        """
        keys = obj.copy()
        value = SetValue.of_constant(keys)
        value.order_known = list(keys) == list(obj) and sys.getsizeof(keys) == sys.getsizeof(obj)
        value.table_known = same_table(keys, obj)
        value.source = source
        value._unguarded = (tx.guards, list(obj), signature(obj))
        return value

    @property
    def keys(self) -> set | frozenset:
        """The key set; for a set from the frame, once guarded to be the runtime set member for member."""
        self._guard_members()
        return self._keys

    def _guard_members(self) -> None:
        if self._unguarded is None:
            return
        guards, members, table = self._unguarded
        self._unguarded = None
        guards.add("EQUALS_MATCH", self.source, "___same_constant(list({s}), {members}) and {sig}({s}) == {table}",
                   f"{self.source.expr()} == {set(members)!r} (in this order, same hash table)", members=members,
                   sig=signature, table=table)

    @staticmethod
    def of_constant(obj: set | frozenset) -> "SetValue":
        """A capture-time result (``set("abc")``): its keys are the real set itself."""
        if any(_has_nan(x) for x in obj):
            raise GraphBreak("a NaN as a set member (its membership depends on which float object it is)")
        return SetValue(obj)

    @property
    def frozen(self) -> bool:
        return type(self._keys) is frozenset

    def python_type(self):
        return type(self._keys)

    def describe(self):
        where = f" {self.source.expr()}" if self.source is not None else ""
        return f"{type(self._keys).__name__}{where} of {len(self._keys)}"

    def length(self) -> int:
        if self._unguarded is not None:
            self._unguarded[0].add("LENGTH", self.source, f"len({{s}}) == {len(self._keys)}")
        return len(self._keys)

    def frozen_key(self):
        """This frozenset as a member of another set (a real frozenset of ``TracedKey``s hashes and compares
        as eager's)."""
        if _holds_members(self.keys):
            return _Member(("frozenset", self.keys), self)
        return self.keys

    # -- what order-independent code may see -------------------------------------------------
    def is_constant(self):
        return self.order_known and _all_constant(self._keys)

    def as_constant(self):
        """The key set itself (exact layout, so ``str()`` and friends see eager's order); never mutate it."""
        if not self.is_constant():
            raise GraphBreak(f"{self.describe()} holding tensors or objects is used where a Python constant "
                             "is needed (its order depends on their ids at run time)")
        return self.keys

    def truth(self, tx):
        return self.length() > 0

    def iterate(self, tx):
        if not self.order_known and len(self.keys) > 1:
            raise GraphBreak(f"iterating over a {self.describe()} holding tensors or objects: its order depends "
                             "on their ids at run time")
        return [_value_of(k) for k in self.keys]

    def contains(self, item: Value, tx=None) -> bool:
        key = lookup_key(item, tx)
        if self._unguarded is None or not _all_constant((key,)):
            return key in self.keys
        # A constant looked up in a set from the frame: only the answer is guarded.
        found = key in self._keys
        self._unguarded[0].add("EQUALS_MATCH", self.source, f"{{m}}({{s}}, {{k}}) is {found}",
                               f"({key!r} in {self.source.expr()}) is {found}", m=type(self._keys).__contains__,
                               k=key)
        return found

    def getattr(self, tx, name):
        if name in _READING or name in _MUTATING and not self.frozen:
            return SetMethodValue(self, name)
        return super().getattr(tx, name)

    # -- changes ---------------------------------------------------------------------------------
    def merge_known(self, known: bool) -> None:
        """After a change with an operand whose table is not known (``known`` False), this set's is not either."""
        if not known:
            self.table_known = self.order_known = False

    def mutate(self, tx, keys_added=(), replay=None) -> None:
        """Called before each change: the key set cannot be rolled back (``TraceContext.mutations``).

        ``replay`` is the change as a call, ``(unbound set method, operand values)``.  A set from the
        frame is written back after the graph (``emit_changes``); unless the copy has its table, the
        runtime set's table may differ from the copy's from then on, so its order is taken as unknown.
        """
        if self.source is not None:
            self._guard_members()  # its final members are written back
            if not self.mutated:
                tx.record_container_mutation(self)
            if not self.table_known:
                self.order_known = False
        if self.changes is not None:
            call = Replay.of(*replay) if replay is not None else None
            if call is None:
                self.changes = None
            else:
                self.changes.append(call)
        self.mutated = True
        self.version += 1
        tx.ctx.mutations += 1
        self.merge_known(not _holds_members(keys_added))

    def emit_changes(self, cg) -> bool:
        """Replay this changed frame set's changes on the runtime set, so that its table ends as eager's.

        False where a change cannot be replayed: the caller refills the set (``clear``, ``update`` with
        ``build``), which is a graph break here unless the refilled table is the traced one."""
        if replay_all(self.changes):
            for call in self.changes:
                call.emit(cg, self)
            return True
        if self._exact_table() and not (self.table_known and same_table(refilled(self.keys), self.keys)):
            raise self._cannot_rebuild("changed in the captured code cannot be written back")
        return False

    def reconstruct(self, cg):
        if self.source is not None:
            cg.extend(self.source.emit())
        elif self.frozen and _all_constant(self.keys):
            cg.load_const(self.keys)
        else:
            cg.build_once(self, self._build)

    def _exact_table(self) -> bool:
        """Whether the runtime set must get the traced table: not for a set ordered by ids (it has none to keep), nor
        for one holding objects hashed by their class's ``__hash__`` (taken to rebuild as it was: its hashes are
        only known as traced)."""
        return not _holds_members(self.keys) and _all_constant(self.keys)

    def _cannot_rebuild(self, what: str) -> GraphBreak:
        return GraphBreak(f"{self.describe()} {what} with the hash table eager has (after pops, or with colliding "
                          "hashes; its pop() and order would differ)")

    def _build(self, cg) -> None:
        """Make this set (made in the trace) anew: from its members where that gives the traced table
        (``set_tables.rebuild_plan``), else by replaying the calls that made and changed it, else a break."""
        plan = None
        if self._exact_table():
            plan = rebuild_plan(self.keys) if self.table_known else None
            if plan is None:
                if self.origin is None or not self.origin.valid() or not replay_all(self.changes):
                    raise self._cannot_rebuild("made in the captured code cannot be rebuilt after the graph")
                self.origin.make(cg)
                for call in self.changes:
                    call.emit(cg)
                return
        if self.frozen:
            cg.append("PUSH_NULL")
            cg.load_const(frozenset)
        if plan is None:
            self.build(cg)
        else:
            _emit_plan(cg, plan)
        if self.frozen:
            cg.append("PRECALL", 1)
            cg.append("CALL", 1)

    def build(self, cg) -> None:
        """Emit a new set of the current members (also what a mutated frame set is updated with)."""
        from .protocols import TracedKey

        for key in self.keys:
            if type(key) is TracedKey:
                key.check_rebuilt()
            _value_of(key).reconstruct(cg)
        cg.append("BUILD_SET", len(self.keys))


def _emit_plan(cg, plan) -> None:
    """Push the set ``plan`` (``set_tables.RebuildPlan``) makes: its items built, its stand-ins discarded."""
    for item in plan.items:
        cg.load_const(item)
    cg.append("BUILD_SET", len(plan.items))
    for stand_in in plan.stand_ins:
        cg.append("COPY", 1)
        cg.append("LOAD_METHOD", "discard")
        cg.load_const(stand_in)
        cg.append("PRECALL", 1)
        cg.append("CALL", 1)
        cg.append("POP_TOP")


def replayed(value: Value, keys) -> Value | None:
    """What a replay passes for an operand a set operation walked as ``keys`` (``operand``): a set or constant
    itself, anything else but a dict as the tuple of the items it gave (the same steps: one add per item)."""
    from .containers import DictValue, TupleValue

    if isinstance(value, SetValue) or rebuilt_as_now(value):
        return value
    if isinstance(value, DictValue) or value.is_constant() and isinstance(value.as_constant(), dict):
        return None
    return TupleValue([_value_of(k) for k in keys])


def operand(tx, value: Value):
    """What a set operation is given for ``value``: a real set/dict/list of keys CPython would walk alike.

    ``set.update`` and friends merge a set's table, presize for a dict and add
    the items of anything else one by one; passing the same kind of object
    makes the key set take the same steps.  Returns ``(keys, whether their table is the runtime's)``.
    """
    from .containers import DictValue

    if isinstance(value, SetValue):
        return value.keys, value.table_known
    if is_set_like(value):
        return value.as_constant(), True
    if isinstance(value, DictValue):
        return dict.fromkeys(value.items), True
    if value.is_constant() and type(value.as_constant()) is dict:
        return dict.fromkeys(value.as_constant()), True
    keys = [key_of(item, tx) for item in value.iterate(tx)]
    return keys, not _holds_members(keys)


def build_set(tx, iterable: Value | None, frozen: bool) -> Value:
    """``set(iterable)`` / ``frozenset(iterable)``."""
    if iterable is None:
        return SetValue(frozenset() if frozen else set())
    if frozen and isinstance(iterable, SetValue) and iterable.frozen:
        return iterable  # frozenset(fs) is fs
    keys, known = operand(tx, iterable)
    kind = frozenset if frozen else set
    return SetValue(kind(keys), known, origin=Replay.of(kind, (replayed(iterable, keys),)))


def set_update(tx, target: SetValue, iterable: Value) -> None:
    """``SET_UPDATE`` / ``s.update(iterable)``: the iterable's members added in CPython's order."""
    keys, known = operand(tx, iterable)
    target.mutate(tx, keys, (set.update, (replayed(iterable, keys),)))
    target.merge_known(known)
    target.keys.update(keys)


def set_add(tx, target: SetValue, item: Value) -> None:
    key = key_of(item, tx)
    target.mutate(tx, (key,), (set.add, (item,)))
    target.keys.add(key)


#: Methods that leave the set as it is (also on frozensets), and those that change it.
_READING = {"union", "intersection", "difference", "symmetric_difference", "issubset", "issuperset",
            "isdisjoint", "copy", "__contains__", "__len__"}
_MUTATING = {"add", "discard", "remove", "pop", "clear", "update", "intersection_update", "difference_update",
             "symmetric_difference_update"}


class SetMethodValue(MethodOfValue):
    """``s.method`` of a ``SetValue``, before the call (rebuilt as that attribute of the set)."""

    def describe(self):
        return f"method {type(self.owner.keys).__name__}.{self.name}"

    def call(self, tx, args, kwargs):
        s, name = self.owner, self.name
        if kwargs:
            raise GraphBreak(f"{self.describe()}() takes no keyword arguments (TypeError at run time)")
        if name in ("add", "discard", "remove", "__contains__"):
            _arity(self, args, 1)
            if name == "add":
                set_add(tx, s, args[0])
                return ConstantValue(None)
            removed = _discard_traced_key(tx, s, args[0]) if name != "__contains__" else None
            if removed is not None:
                if name == "remove" and not removed:
                    raise GraphBreak("set.remove of a missing member (KeyError at run time)")
                return ConstantValue(None)
            present = s.contains(args[0], tx)
            if name == "__contains__":
                return ConstantValue(present)
            if name == "remove" and not present:
                raise GraphBreak("set.remove of a missing member (KeyError at run time)")
            if present:
                s.mutate(tx, replay=(set.discard, (args[0],)))
                s.keys.discard(lookup_key(args[0], tx))
            return ConstantValue(None)
        if name in ("pop", "clear", "copy", "__len__"):
            _arity(self, args, 0)
            if name == "__len__":
                return ConstantValue(s.length())
            if name == "copy":
                return SetValue(s.keys.copy(), s.table_known, origin=Replay.of(type(s.keys).copy, (s,)))
            if name == "pop":
                if not s.keys:
                    raise GraphBreak("pop from an empty set (KeyError at run time)")
                if len(s.keys) > 1 and not s.order_known:
                    raise GraphBreak("set.pop() on a set holding tensors or objects: which member it removes "
                                     "depends on their ids at run time")
                if len(s.keys) > 1 and not s.table_known:
                    raise GraphBreak(f"set.pop() on {s.describe()}, whose hash table (left by earlier removals "
                                     "or pops) is not known: which member it removes depends on it")
            s.mutate(tx, replay=(getattr(set, name), ()))
            return _value_of(s.keys.pop()) if name == "pop" else ConstantValue(s.keys.clear())
        if name in ("symmetric_difference", "symmetric_difference_update", "issubset", "issuperset",
                    "isdisjoint"):
            _arity(self, args, 1)
        if name in ("isdisjoint", "issuperset") and is_lazy(args[0]):
            return ConstantValue(_pull_until_decided(tx, s, args[0], stop_when_present=name == "isdisjoint"))
        operands = [operand(tx, a) for a in args]
        keys = [k for k, _ in operands]
        known = s.table_known and all(k for _, k in operands) and not any(_holds_members(k) for k in keys)
        if name.endswith("_update") or name == "update":
            s.mutate(tx, [k for ks in keys for k in ks],
                     (getattr(set, name), tuple(replayed(a, k) for a, k in zip(args, keys))))
            getattr(s.keys, name)(*keys)
            s.merge_known(known)
            return ConstantValue(None)
        result = getattr(s.keys, name)(*keys)
        if type(result) is bool:
            return ConstantValue(result)
        return SetValue(result, known, origin=Replay.of(getattr(type(s.keys), name),
                                                         (s, *(replayed(a, k) for a, k in zip(args, keys)))))


def _discard_traced_key(tx, s: SetValue, item: Value) -> bool | None:
    """``s.discard(obj)`` / ``s.remove(obj)`` of an object hashed by its class's ``__hash__``: one hash and one
    lookup, as eager's (its traced ``__eq__`` runs once).  Returns whether it was a member; None (nothing
    done) for any other item."""
    from .protocols import TracedKey

    key = lookup_key(item, tx) if not (item.is_constant() or isinstance(item, SetValue)) else None
    if type(key) is not TracedKey:
        return None
    keys = s.keys
    size = len(keys)
    keys.discard(key)
    if len(keys) == size:
        return False
    s.mutate(tx)
    return True


def _pull_until_decided(tx, s: SetValue, iterator: Value, stop_when_present: bool) -> bool:
    """``s.isdisjoint(it)`` / ``s.issuperset(it)`` over a lazy iterator: CPython stops at the deciding item."""
    while (item := iterator.next_item(tx)) is not None:
        if (key_of(item, tx) in s.keys) is stop_when_present:
            return False
    return True


def _arity(method: SetMethodValue, args, n: int) -> None:
    if len(args) != n:
        raise GraphBreak(f"{method.describe()}() takes {n} argument{'' if n == 1 else 's'} ({len(args)} given) "
                         "(TypeError at run time)")


#: Set operators: BINARY_OP symbol -> the operator on key sets.
BINARY = {"|": operator.or_, "&": operator.and_, "-": operator.sub, "^": operator.xor,
          "|=": operator.ior, "&=": operator.iand, "-=": operator.isub, "^=": operator.ixor}
COMPARE = {"<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt,
           ">=": operator.ge}


def _as_set(tx, value: Value) -> SetValue:
    return value if isinstance(value, SetValue) else SetValue(value.as_constant())


def binary(tx, symbol: str, a: Value, b: Value) -> Value:
    """``a <symbol> b`` where both are sets (``is_set_like``)."""
    if symbol not in BINARY:
        raise GraphBreak(f"unsupported operand type(s) for {symbol}: '{_type_name(a)}' and '{_type_name(b)}' "
                         "(TypeError at run time)")
    left, right = _as_set(tx, a), _as_set(tx, b)
    known = left.table_known and right.table_known
    if symbol.endswith("=") and not left.frozen:
        # In place on a set (`s |= t`): the same object, changed.
        if left is not a:
            raise GraphBreak(f"`{symbol}` on a constant set")
        left.mutate(tx, right.keys, (BINARY[symbol], (b,)))
        BINARY[symbol](left.keys, right.keys)
        left.merge_known(known)
        return left
    result = BINARY[symbol](left.keys, right.keys)
    return SetValue(result, known, origin=Replay.of(BINARY[symbol], (a, b)))


def compare(tx, symbol: str, a: Value, b: Value) -> Value | None:
    """``a <symbol> b`` where ``a`` or ``b`` is a set; None when this is not a set comparison."""
    if is_set_like(a) and is_set_like(b):
        return ConstantValue(COMPARE[symbol](_as_set(tx, a).keys, _as_set(tx, b).keys))
    other = b if is_set_like(a) else a
    if symbol in ("==", "!=") and other.is_constant():
        # Run for real: a dict's keys and items views equal sets; any other non-set constant never does.
        left = _as_set(tx, a).keys if other is b else other.as_constant()
        right = _as_set(tx, b).keys if other is a else other.as_constant()
        return ConstantValue(COMPARE[symbol](left, right))
    return None
