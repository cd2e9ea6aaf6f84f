"""The hash table of a real set: what decides its iteration order and the member ``pop()`` removes.

Two sets with the same members can iterate differently (``{9, 1}`` and
``{1, 9}`` in a table of 8 slots), and two that iterate alike can still
differ later: a removal leaves a *dummy* slot that a later insertion reuses,
and ``pop()`` searches from a *finger* that an earlier ``pop()`` left and that
``clear()`` keeps.  So a set built anew from its members in their order, or a
copy, is not always the set eager code would have: its next ``pop()``, or its
order after the next ``add``, may differ.  ``signature`` reads what decides
all of that from CPython's ``PySetObject`` (3.11's layout: fill, used, mask,
table, hash, finger) so that ``values.sets`` can tell when a copy or a
rebuild is exact, and guard a frame set on it.

Where no rebuild gives the traced table, ``Replay`` keeps the calls that made
and changed a set, so that the code after the graph makes the runtime set go
the same way.  This module only reads sets it is given; it never changes one
and emits no graph nodes.
"""
from __future__ import annotations

import ctypes

from .base import Value

#: ``setentry``: a key pointer and its cached hash (-1 marks a dummy, a NULL key an unused slot).
_ENTRY_WORDS = 2


class _PySetObject(ctypes.Structure):
    _fields_ = [("ob_refcnt", ctypes.c_ssize_t), ("ob_type", ctypes.c_void_p), ("fill", ctypes.c_ssize_t),
                ("used", ctypes.c_ssize_t), ("mask", ctypes.c_ssize_t), ("table", ctypes.c_void_p),
                ("hash", ctypes.c_ssize_t), ("finger", ctypes.c_ssize_t)]


def signature(s: set | frozenset) -> tuple:
    """What decides how ``s`` iterates and how later operations on it go, apart from which objects its keys are:
    the table size, filled and used slot counts, the ``pop()`` finger, and per slot whether it is unused and the
    hash it holds (a dummy's is -1).  Equal signatures and equal members in iteration order mean equal tables."""
    if type(s) not in (set, frozenset):
        raise TypeError(f"signature() of a {type(s).__name__}")
    header = _PySetObject.from_address(id(s))
    words = memoryview(ctypes.string_at(header.table, (header.mask + 1) * _ENTRY_WORDS * 8)).cast("q")
    unused = bytes(key == 0 for key in words[0::_ENTRY_WORDS])
    return header.fill, header.used, header.mask, header.finger, unused, words[1::_ENTRY_WORDS].tobytes()


def same_table(a: set | frozenset, b: set | frozenset) -> bool:
    """Whether ``a`` and ``b`` hold equal members in equal slots, with the same dummies and finger."""
    return signature(a) == signature(b) and list(a) == list(b)


def _slots(s: set | frozenset) -> list:
    """Per slot: the member there, ``_DUMMY``, or ``_UNUSED``, in slot (iteration) order."""
    header = _PySetObject.from_address(id(s))
    words = memoryview(ctypes.string_at(header.table, (header.mask + 1) * _ENTRY_WORDS * 8)).cast("q")
    members = iter(s)
    return [_UNUSED if key == 0 else _DUMMY if h == -1 else next(members)
            for key, h in zip(words[0::_ENTRY_WORDS], words[1::_ENTRY_WORDS])]


_UNUSED, _DUMMY = object(), object()


class RebuildPlan:
    """How the code after the graph makes a set with the traced one's table: ``BUILD_SET`` of ``items`` (the
    members in slot order, with a stand-in int in each slot a removal left a dummy in), then a ``discard`` of
    each of the ``stand_ins`` (which leaves the dummies).  ``frozen``: then ``frozenset()`` of it."""

    def __init__(self, items: list, stand_ins: list, frozen: bool):
        self.items = items
        self.stand_ins = stand_ins
        self.frozen = frozen

    def run(self) -> set | frozenset:
        """What the emitted code makes, made now from the same objects."""
        made = set()
        for item in self.items:
            made.add(item)
        for stand_in in self.stand_ins:
            made.discard(stand_in)
        return frozenset(made) if self.frozen else made


def rebuild_plan(keys: set | frozenset) -> RebuildPlan | None:
    """A ``RebuildPlan`` whose set has ``keys``' table (checked by making it now), or None where there is none:
    a table bigger than its members need, hashes colliding past linear probing, a finger ``pop()`` moved."""
    slots = _slots(keys)
    size = len(slots)
    items, stand_ins = [], []
    for index, entry in enumerate(slots):
        if entry is _UNUSED:
            continue
        if entry is _DUMMY:
            entry = next(n for n in range(index + size, index + size * (len(keys) + 2), size) if n not in keys)
            stand_ins.append(entry)
        items.append(entry)
    plan = RebuildPlan(items, stand_ins, type(keys) is frozenset)
    return plan if same_table(plan.run(), keys) else None


def refilled(keys: set) -> set:
    """The set a runtime set whose finger is 0 becomes after ``clear()`` (which keeps the finger) and ``update()``
    with the members in their order: how a changed set from the frame is written back."""
    fresh = set()
    fresh.update(list(keys))
    return fresh


class Replay:
    """A call that made or changed a set, ``method(*operands)``, kept to make the runtime set go the same way.

    Replaying a set's calls gives it eager's hash table whatever its history, where building it from
    its members may not (``rebuild_plan``).  Each operand must be rebuilt as it was at the call: a
    hashable constant, a tensor, or a set not changed since (``versions``).
    """

    __slots__ = ("method", "operands", "versions")

    def __init__(self, method, operands: tuple):
        self.method = method
        self.operands = operands
        from .sets import SetValue

        self.versions = [(v, v.version) for v in operands if isinstance(v, SetValue)]

    @staticmethod
    def of(method, operands: tuple) -> "Replay | None":
        """The replay of ``method(*operands)``, or None where an operand cannot be rebuilt as it is now."""
        return Replay(method, operands) if all(rebuilt_as_now(v) for v in operands) else None

    def valid(self) -> bool:
        """Whether every set operand is still as the call saw it."""
        return all(value.version == version for value, version in self.versions)

    def emit(self, cg, target: Value | None = None) -> None:
        """Push ``method(*operands)``; with ``target``, call it on ``target`` (None: the set on top of the stack)
        and drop the result."""
        cg.append("PUSH_NULL")
        cg.load_const(self.method)
        if target is not None:
            target.reconstruct(cg)
        else:
            cg.append("COPY", 3)
        for value in self.operands:
            value.reconstruct(cg)
        cg.append("PRECALL", len(self.operands) + 1)
        cg.append("CALL", len(self.operands) + 1)
        cg.append("POP_TOP")

    def make(self, cg) -> None:
        """Push ``method(*operands)``: the set this call made."""
        cg.call(self.method, *self.operands)


def rebuilt_as_now(value: Value | None) -> bool:
    """Whether the code after the graph rebuilds ``value`` as it is now: a hashable constant, a tensor, a set
    (``Replay.versions`` checks it did not change), or a tuple of those."""
    from .containers import TupleValue
    from .sets import SetValue
    from .tensor import TensorValue

    if value is None:
        return False
    if isinstance(value, (SetValue, TensorValue)):
        return True
    if type(value) is TupleValue:
        return all(rebuilt_as_now(item) for item in value.items)
    if not value.is_constant():
        return False
    try:
        hash(value.as_constant())
    except TypeError:
        return False
    return True


def replay_all(calls) -> bool:
    """Whether every call of ``calls`` (None: one could not be replayed) can be replayed now."""
    return calls is not None and all(call.valid() for call in calls)
