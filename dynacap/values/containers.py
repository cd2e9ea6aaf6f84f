"""Containers built of values: tuples, lists, dicts, and iterators over known items.

Items are ``Value``s, so a tuple may hold tensors and constants together.
Containers read from the frame keep their ``source``; lists and dicts
created while tracing are tracked for mutation so that the code generator
can rebuild them.  Mutating a container that came from outside the frame is
a side effect the foundation does not replay, so it is a graph break.
"""
from __future__ import annotations

import collections
import functools

from ..errors import GraphBreak
from .base import Value
from .constant import ConstantValue


def load_existing(container: Value, cg) -> bool:
    """Push the runtime object a container already is, if it is one; False if it must be built.

    A container from the frame is reloaded from its source (a mutated one was
    updated in place by the side-effect replay); one made while tracing and
    shared across a break is reloaded from its local (``Emitter.share``).
    """
    if container.source is not None:
        cg.extend(container.source.emit())
        return True
    return cg.load_shared(container)


def holds_mutable(value: Value) -> bool:
    """Whether ``value`` is or holds (in tuples) a list, dict, set or deque: evaluating on its ``as_constant()``
    would work on a copy, losing mutations and identity (``(l,) + (2,)`` must still hold ``l``)."""
    from .deques import DequeValue
    from .sets import SetValue

    if isinstance(value, (ListValue, DictValue, SetValue, DequeValue)):
        return True
    return isinstance(value, SequenceValue) and any(holds_mutable(i) for i in value.items)


class FrameItems:
    """The items of a list or tuple read from the frame, wrapped and guarded one by one as they are read.

    Guarding what was read, not the whole container: ``BIG[7]`` of a 30,000-item
    list guards the list's type, that it has more than 7 items and item 7.
    Reading every item (iteration, ``in``, rebuilding it) guards every item and
    the exact length, as eagerly wrapping would.
    """

    def __init__(self, tx, obj, source):
        self.tx, self.obj, self.source = tx, obj, source
        self._read: dict[int, Value] = {}
        self._length_guarded = False
        self._longer_than = -1

    def item(self, i: int) -> Value:
        value = self._read.get(i)
        if value is None:
            from ..source import ItemSource
            from .wrap import wrap

            value = self._read[i] = wrap(self.tx, self.obj[i], ItemSource(self.source, i))
        return value

    def guard_length(self) -> None:
        if not self._length_guarded:
            self._length_guarded = True
            self.tx.guards.add("LENGTH", self.source, f"len({{s}}) == {len(self.obj)}")

    def guard_longer_than(self, i: int) -> None:
        if not self._length_guarded and i > self._longer_than:
            self._longer_than = i
            self.tx.guards.add("LENGTH", self.source, f"len({{s}}) > {i}")


def build_tuple_of(cg, cls: type, items: list) -> None:
    """Emit ``cls((item, ...))``: a tuple subclass (a named result, ``torch.Size``) rebuilt from its items."""
    cg.append("PUSH_NULL")
    cg.load_const(cls)
    for item in items:
        item.reconstruct(cg)
    cg.append("BUILD_TUPLE", len(items))
    cg.append("PRECALL", 1)
    cg.append("CALL", 1)


class SequenceValue(Value):
    container_type: type = tuple

    def __init__(self, items: list[Value], source=None):
        self._items = list(items)
        self.source = source
        #: For a list/tuple read from the frame: its items, wrapped one by one as they are read.
        self._frame: FrameItems | None = None

    @classmethod
    def from_frame(cls, frame_items: "FrameItems"):
        """A sequence of the frame whose items are wrapped (and guarded) only when the trace reads them."""
        value = cls([], frame_items.source)
        value._items = None
        value._frame = frame_items
        return value

    @property
    def items(self) -> list[Value]:
        """Every item (reading them all: each is guarded, and so is the length)."""
        if self._items is None:
            self._frame.guard_length()
            self._items = [self._frame.item(i) for i in range(len(self._frame.obj))]
        return self._items

    @items.setter
    def items(self, items) -> None:
        self._items = list(items)

    def length(self, guard: bool = True) -> int:
        """``len()``: from a frame sequence, guarded by its length only (``guard=False``: not at all)."""
        if self._items is not None:
            return len(self._items)
        if guard:
            self._frame.guard_length()
        return len(self._frame.obj)

    def item(self, index: int) -> Value:
        """``seq[index]``; IndexError as Python's (with a guard on the length it depended on)."""
        if self._items is not None:
            return self._items[index]
        n = len(self._frame.obj)
        if not -n <= index < n:
            self._frame.guard_length()
            raise IndexError(index)
        if index < 0:
            self._frame.guard_length()  # the item it reads depends on the length
            index += n
        else:
            self._frame.guard_longer_than(index)
        return self._frame.item(index)

    def python_type(self) -> type:
        return self.container_type

    def is_constant(self) -> bool:
        return all(i.is_constant() for i in self.items)

    def as_constant(self):
        return self.container_type(i.as_constant() for i in self.items)

    def describe(self) -> str:
        where = f" {self.source.expr()}" if self.source is not None else ""
        return f"{self.container_type.__name__}{where} of {self.length(guard=False)}"

    def truth(self, tx) -> bool:
        return bool(self.length())

    def iterate(self, tx):
        return list(self.items)

    def getitem(self, tx, index):
        key = index.as_constant()
        if isinstance(key, slice):
            # A slice of a named tuple (or a struct sequence, a dict view...) is a plain tuple; of a torch.Size, a Size.
            kind = type(self) if type(self) in (TupleValue, ListValue, SizeValue) else TupleValue
            return kind(self.items[key])
        if not isinstance(key, int):
            raise GraphBreak(f"indexing {self.describe()} with {type(key).__name__}")
        try:
            return self.item(key)
        except IndexError:
            reason = f"index {key} out of range for {self.describe()}"
            if self.container_type not in (list, tuple):  # a torch.Size or subclass words it otherwise
                raise GraphBreak(reason) from None
            from .exceptions import python_error

            raise python_error(IndexError, f"{self.container_type.__name__} index out of range",
                               reason=reason) from None

    def reconstruct(self, cg):
        if load_existing(self, cg):
            return
        for item in self.items:
            item.reconstruct(cg)
        cg.append("BUILD_TUPLE" if self.container_type is tuple else "BUILD_LIST", len(self.items))


class TupleValue(SequenceValue):
    container_type = tuple

    def getattr(self, tx, name):
        if name in ("count", "index"):
            from .container_methods import ItemsMethodValue

            return ItemsMethodValue(self, name)
        return super().getattr(tx, name)


class StructSeqValue(TupleValue):
    """A named result tuple of a torch operation (``torch.return_types.max``: ``.values``, ``.indices``)."""

    def __init__(self, items, tuple_class: type, source=None):
        super().__init__(items, source)
        self.tuple_class = tuple_class

    def python_type(self):
        return self.tuple_class

    def as_constant(self):
        return self.tuple_class(tuple(i.as_constant() for i in self.items))

    def getattr(self, tx, name):
        fields = self.tuple_class.__match_args__
        if name in fields:
            return self.items[fields.index(name)]
        return super().getattr(tx, name)

    def reconstruct(self, cg):
        if not load_existing(self, cg):
            build_tuple_of(cg, self.tuple_class, self.items)


class SizeValue(TupleValue):
    """``torch.Size``: its dims are constants, or symbolic numbers for symbolic sizes (dynamic shapes)."""

    def python_type(self):
        import torch

        return torch.Size

    def as_constant(self):
        import torch

        return torch.Size(i.as_constant() for i in self.items)

    def getattr(self, tx, name):
        if name == "numel":
            from .methods import ConstantMethodValue

            return ConstantMethodValue(ConstantValue(self.as_constant()), name)
        return super().getattr(tx, name)

    def reconstruct(self, cg):
        if all(isinstance(i, ConstantValue) for i in self.items):
            cg.load_const(self.as_constant())
            return
        import torch

        build_tuple_of(cg, torch.Size, self.items)


class ListValue(SequenceValue):
    container_type = list

    def __init__(self, items, source=None):
        super().__init__(items, source)
        self.mutated = False

    def mutate(self, tx, what: str) -> None:
        if self.source is not None and not self.mutated:
            tx.record_container_mutation(self)
        self.mutated = True
        tx.ctx.mutations += 1

    def getattr(self, tx, name):
        from .container_methods import ItemsMethodValue
        from .container_methods import ContainerMethodValue

        if name in ("append", "extend", "insert", "pop", "reverse", "clear", "copy", "sort"):
            return ContainerMethodValue(self, name)
        if name in ("remove", "index", "count"):
            return ItemsMethodValue(self, name)
        return super().getattr(tx, name)

    def real_items(self) -> list:
        """A real list of the item values, for a method run for real (``container_methods``)."""
        return list(self.items)

    def mutate_items(self, tx, real: list, method: str = "", args=()) -> None:
        """The items a method run for real left in ``real``."""
        self.mutate(tx, "a list method")
        self.items = real

    def like_items(self, real) -> "ListValue":
        return ListValue(list(real))

    def setitem(self, tx, index: Value, value: Value) -> None:
        self.mutate(tx, "item assignment")
        key = index.as_constant()
        if isinstance(key, slice):
            self.items[key] = value.iterate(tx)
        else:
            self.items[key] = value


def copied(factory, items):
    """``protocols.copied``: a copy of a dict's items that traces no key's ``__eq__``."""
    from .protocols import copied as copy_quietly

    return copy_quietly(factory, items)


#: What a lookup of a missing key finds (``dict.get``/``pop`` default: never compared).
ABSENT = object()


def dict_key(tx, value: Value):
    """The key a dict of the trace stores for ``value``: a constant itself, a user object whose class has a
    Python ``__hash__`` a ``protocols.TracedKey`` (hashed and compared by its traced methods when the real
    dict asks, as eager's does); an unhashable one is CPython's TypeError."""
    if not value.is_constant():
        from .protocols import hashed_key

        key = hashed_key(tx, value)
        if key is not None:
            return key
    key = value.as_constant()
    try:
        hash(key)
    except TypeError as e:
        raise GraphBreak(f"{e} (TypeError at run time)") from None
    return key


def missing_key(key, where: str):
    """The ``KeyError`` a lookup of ``key`` (a dict key of the trace) raises, catchable as in eager."""
    from .exceptions import ExceptionValue, raising
    from .protocols import key_value

    value = key_value(key)
    shown = repr(key) if value.is_constant() else value.describe()
    return raising(ExceptionValue(KeyError, [value]), f"key {shown} is not in {where} (KeyError at run time)")


class DictValue(Value):
    """A dict with constant keys: a ``dict``, an ``OrderedDict`` or a ``defaultdict`` (``dict_type``).

    A key may also be a ``protocols.TracedKey`` (a user object hashed by its class's ``__hash__``): the
    dict is then not a constant, and its keys are read back as their values (``key_value``).

    A ``defaultdict`` missing a key calls its ``default_factory`` (a value) and stores
    the result, as ``__missing__`` does.
    """

    def __init__(self, items: dict, source=None, dict_type: type = dict, default_factory: Value | None = None):
        self.items = copied(dict, items)
        self.source = source
        self.mutated = False
        self.dict_type = dict_type
        self.default_factory = default_factory

    def python_type(self):
        return self.dict_type

    def describe(self):
        where = f" {self.source.expr()}" if self.source is not None else ""
        return f"{self.dict_type.__name__}{where} of {len(self.items)}"

    def like(self, items: dict) -> "DictValue":
        """A new dict of the same type (and factory) holding ``items`` (``copy()``)."""
        return DictValue(items, dict_type=self.dict_type, default_factory=self.default_factory)

    def is_constant(self):
        # An OrderedDict compares by order and a defaultdict holds its factory: only plain dicts fold.
        from .protocols import holds_traced_keys

        return self.dict_type is dict and all(v.is_constant() for v in self.items.values()) \
            and not holds_traced_keys(self.items)

    def as_constant(self):
        from .protocols import holds_traced_keys

        if holds_traced_keys(self.items):
            raise GraphBreak(f"{self.describe()} keyed by objects made in or read by the captured code is used "
                             "where a Python constant is needed")
        return {k: v.as_constant() for k, v in self.items.items()}

    def truth(self, tx):
        return bool(self.items)

    def as_constant_items(self) -> dict:
        """The items by constant key (a dict keyed by objects breaks)."""
        from .protocols import holds_traced_keys

        if holds_traced_keys(self.items):
            raise GraphBreak(f"{self.describe()} keyed by objects is used where a Python constant is needed")
        return self.items

    def iterate(self, tx):
        from .protocols import key_value

        return [key_value(k) for k in self.items]

    def getitem(self, tx, index):
        self.refuse_tensor_key(index)
        key = dict_key(tx, index)
        found = self.items.get(key, ABSENT)  # one lookup, as eager's (a traced ``__eq__`` runs once)
        if found is ABSENT:
            if self.default_factory is None or (self.default_factory.is_constant()
                                                and self.default_factory.as_constant() is None):
                raise missing_key(key, self.describe())
            # ``__missing__``: ``self[key] = default_factory()`` (hashed again), and that value.
            value = self.default_factory.call(tx, [], {})
            self.setitem(tx, index, value)
            return value
        return found

    def refuse_tensor_key(self, key: Value) -> None:
        """A tensor key: a dict from the frame is then read by key (``keyed_dicts``), any other breaks."""
        if key.kind() == "tensor":
            if self.source is not None:
                from .keyed_dicts import NeedsKeyedDict

                raise NeedsKeyedDict(self.source.expr())
            raise GraphBreak(f"{self.describe()} made in the captured code, keyed by a tensor")

    def mutate(self, tx) -> None:
        if self.source is not None and not self.mutated:
            tx.record_container_mutation(self)
        self.mutated = True
        tx.ctx.mutations += 1

    def setitem(self, tx, index, value):
        self.refuse_tensor_key(index)
        key = dict_key(tx, index)
        self.mutate(tx)
        self.items[key] = value

    def getattr(self, tx, name):
        from .container_methods import ContainerMethodValue

        if name in ("keys", "values", "items", "get", "update", "pop", "setdefault", "copy"):
            return ContainerMethodValue(self, name)
        if name in ("popitem", "clear") or name == "move_to_end" and self.dict_type is collections.OrderedDict:
            from .container_methods import ItemsMethodValue

            return ItemsMethodValue(self, name)
        return super().getattr(tx, name)

    def real_items(self) -> dict:
        """A real dict of this type holding the item values, for a method run for real (``container_methods``)."""
        if self.dict_type is collections.defaultdict:
            return copied(functools.partial(collections.defaultdict, None), self.items)
        return copied(self.dict_type, self.items)

    def mutate_items(self, tx, real: dict, method: str = "", args=()) -> None:
        """The items a method run for real left in ``real``, in its order."""
        self.mutate(tx)
        self.items = copied(dict, real)

    def like_items(self, real) -> "DictValue":
        return self.like(copied(dict, real))

    def reconstruct(self, cg):
        if not load_existing(self, cg):
            self.build(cg)

    def build(self, cg) -> None:
        """Emit a new dict (of ``dict_type``) with the current items."""
        if self.dict_type is not dict:
            cg.append("PUSH_NULL")
            cg.load_const(self.dict_type)
            if self.dict_type is collections.defaultdict:
                self.default_factory.reconstruct(cg)
        from .protocols import TracedKey

        for k, v in self.items.items():
            if type(k) is TracedKey:
                k.check_rebuilt()
                k.value.reconstruct(cg)
            else:
                cg.load_const(k)
            v.reconstruct(cg)
        cg.append("BUILD_MAP", len(self.items))
        if self.dict_type is not dict:
            nargs = 2 if self.dict_type is collections.defaultdict else 1
            cg.append("PRECALL", nargs)
            cg.append("CALL", nargs)


class DictViewValue(TupleValue):
    """``d.keys()`` / ``d.values()`` / ``d.items()``: a live view of a dict value.

    Its items are read from the dict at each use, so changes made to the dict after
    the view was taken are seen, as in Python.  As a constant it is a real view (of
    a copy), so ``in``, ``==`` and set operators (``d.keys() | {5}``) answer exactly;
    at run time it is rebuilt as the same method of the rebuilt dict.
    """

    def __init__(self, dict_value: "DictValue", kind: str):
        super().__init__([])
        self.dict_value = dict_value
        self.kind = kind  # "keys", "values" or "items"

    @property
    def items(self) -> list[Value]:
        from .protocols import key_value

        d = self.dict_value.items
        if self.kind == "keys":
            return [key_value(k) for k in d]
        if self.kind == "values":
            return list(d.values())
        return [TupleValue([key_value(k), v]) for k, v in d.items()]

    @items.setter
    def items(self, items) -> None:
        assert not items, "a dict view has no items of its own"

    def python_type(self) -> type:
        return type(getattr({}, self.kind)())

    def describe(self) -> str:
        return f"dict_{self.kind} of {len(self.dict_value.items)}"

    def length(self, guard: bool = True) -> int:
        return len(self.dict_value.items)

    def item(self, index: int) -> Value:
        raise GraphBreak(f"'dict_{self.kind}' object is not subscriptable (TypeError at run time)")

    def as_constant(self):
        return getattr({k: v.as_constant() for k, v in self.dict_value.as_constant_items().items()}, self.kind)()

    def getattr(self, tx, name):
        raise GraphBreak(f"attribute `.{name}` of a dict view is not supported")

    def reconstruct(self, cg):
        if hasattr(self.dict_value, "reconstruct_view"):  # the items of a dict subclass object (``subclasses``)
            self.dict_value.reconstruct_view(cg, self.kind)
            return
        self.dict_value.reconstruct(cg)
        cg.append("LOAD_METHOD", self.kind)
        cg.append("PRECALL", 0)
        cg.append("CALL", 0)


class IteratorValue(Value):
    """The iterator of an unrolled ``for`` loop: its items are known at capture time.

    Iterators that run code to make each item (generators) are ``iterators.PullIterator``;
    both answer ``next_item(tx)``.
    """

    def __init__(self, items: list[Value]):
        self.items = list(items)
        self.position = 0

    def describe(self):
        return f"iterator over {len(self.items)} items"

    def next_item(self, tx) -> Value | None:
        """The next item, or None once exhausted."""
        if self.position >= len(self.items):
            return None
        item = self.items[self.position]
        self.position += 1
        return item

    def iterate(self, tx):
        rest = self.items[self.position:]
        self.position = len(self.items)
        return rest

    def reconstruct(self, cg):
        for item in self.items[self.position:]:
            item.reconstruct(cg)
        cg.append("BUILD_LIST", len(self.items) - self.position)
        cg.append("GET_ITER")
