"""Builtins on user objects by CPython's own protocol code: ``float``/``int``/``operator.index``/``hash``/
``str``/``repr``/``format``, ``abs``, ordering for ``sorted``/``min``/``max``, ``in`` by iteration, and
iteration by ``__getitem__`` (the old sequence protocol).

Where the protocol's answer is a Python constant (a number, a hash, a string), the real builtin runs at
capture time on a *stand-in*: an object of a throwaway class with the user class's name whose special
methods are the user's, each traced (inlined) when CPython's C code calls it.  CPython then decides
which method runs, in which order, what it accepts of the result and what it raises (``__float__``
returning an int, ``__hash__ = None``, ``-1`` hashed as ``-2``), exactly as at run time; a method's
result must be a constant of the trace.  Methods the class inherits from ``object`` stay ``object``'s,
except those whose answer depends on the object's address (``object.__repr__``, ``object.__hash__``),
which break.  What must not live here: running any user code for real (it is always traced) and
anything about containers.
"""
from __future__ import annotations

import types
import warnings

from ..errors import GraphBreak
from .base import Value
from .constant import ConstantValue
from .iterators import PullIterator
from .objects import _MISSING, class_lookup

#: The methods a stand-in may carry (what the builtins here reach through type slots).
_PROTOCOL_METHODS = ("__float__", "__int__", "__index__", "__trunc__", "__hash__", "__str__", "__repr__",
                     "__format__")
#: ``object``'s methods whose answer is the object's address: unknown at capture time.
_BY_ADDRESS = {"__repr__": object.__repr__, "__hash__": object.__hash__}


def user_class(value: Value) -> type | None:
    from .operators import _object_class

    return _object_class(value)


def run_protocol(tx, value: Value, builtin, what: str, *args):
    """``builtin(obj, *args)`` run for real on a stand-in of the user object ``value`` (its methods traced):
    the constant it returns, or what it raises (a ``PythonError``, catchable as in eager)."""
    standin = _standin(tx, value, what)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = builtin(standin, *args)
    except GraphBreak:
        raise
    except Exception as e:
        from .exceptions import from_real

        raise from_real(e, f"{what} on {value.describe()} raised {type(e).__name__}: {e}") from None
    if caught:
        raise GraphBreak(f"{what} on {value.describe()} warns at run time ({caught[0].message})")
    return result


def _standin(tx, value: Value, what: str):
    cls = user_class(value)
    namespace = {"__module__": cls.__module__, "__qualname__": cls.__qualname__, "__slots__": ()}
    for name in _PROTOCOL_METHODS:
        method = class_lookup(cls, name)
        if method is None:
            namespace[name] = None  # ``__hash__ = None``: unhashable, as CPython says it
        elif method is _BY_ADDRESS.get(name):
            namespace[name] = _by_address(value, name, what)
        elif method is _MISSING or method is class_lookup(object, name):
            continue  # object's own (``object.__str__`` calls the stand-in's ``__repr__``)
        elif type(method) is types.FunctionType:
            namespace[name] = _traced(tx, value, name, what)
        else:
            namespace[name] = _unsupported(value, name, method, what)
    return type(cls.__name__, (), namespace)()


def _traced(tx, value: Value, name: str, what: str):
    def method(_standin, *args):
        from .operators import call_dunder

        result = call_dunder(tx, value, name, [ConstantValue(a) for a in args], what)
        if not result.is_constant():
            raise GraphBreak(f"{what} on {value.describe()}: its {name} returned {result.describe()}, "
                             "not known at capture time")
        return result.as_constant()

    return method


def _by_address(value: Value, name: str, what: str):
    def method(_standin, *args):
        raise GraphBreak(f"{what} on {value.describe()}: its class's {name} is object's, which depends on the "
                         "object's address (not known at capture time)")

    return method


def _unsupported(value: Value, name: str, method, what: str):
    def stub(_standin, *args):
        raise GraphBreak(f"{what} on {value.describe()}: its {name} is a {type(method).__name__}, not a Python "
                         "function")

    return stub


def constant_protocol(tx, builtin, what: str, value: Value, *args: Value) -> Value | None:
    """``builtin(value, *args)`` for a user object (None for other values): a constant of the trace."""
    if user_class(value) is None or not all(a.is_constant() for a in args):
        return None
    return ConstantValue(run_protocol(tx, value, builtin, what, *(a.as_constant() for a in args)))


def absolute(tx, value: Value) -> Value | None:
    """``abs(obj)``: ``type(obj).__abs__(obj)``, whatever it returns (another object, a tensor)."""
    from .operators import call_dunder

    cls = user_class(value)
    if cls is None:
        return None
    if class_lookup(cls, "__abs__") is _MISSING:
        from .exceptions import python_error

        raise python_error(TypeError, f"bad operand type for abs(): '{cls.__name__}'",
                           reason=f"`abs()` on {value.describe()}, whose class has no __abs__ (TypeError at run time)")
    return call_dunder(tx, value, "__abs__", [], "`abs()`")


class _Ordered:
    """An item as ``sorted``/``min``/``max`` compare it: each ``<``/``>`` CPython's sort asks for is the
    traced comparison of the values (their classes' ``__lt__``/``__gt__``, reflected ones included)."""

    __slots__ = ("tx", "value")

    def __init__(self, tx, value: Value):
        self.tx = tx
        self.value = value

    def __lt__(self, other):
        return self._compare("<", other)

    def __gt__(self, other):
        return self._compare(">", other)

    def _compare(self, symbol: str, other) -> bool:
        from .operators import compare_op

        right = other.value if type(other) is _Ordered else ConstantValue(other)
        return compare_op(self.tx, symbol, self.value, right).truth(self.tx)


def ordering_key(tx, value: Value):
    """What ``sorted``/``min``/``max`` compare for ``value``: a constant itself, anything else a stand-in
    whose comparisons are traced when CPython's sort asks for them."""
    return value.as_constant() if value.is_constant() else _Ordered(tx, value)


def contains_by_iteration(tx, item: Value, container: Value) -> bool | None:
    """``item in obj`` for a class without ``__contains__`` (``_PySequence_IterSearch``): ``iter(obj)``
    pulled until an item that is ``item`` or equals it (``candidate == item``, candidate on the left).
    None when the class has a ``__contains__``."""
    from .iterators import iterator_of
    from .operators import compare_op, identical

    cls = user_class(container)
    if cls is None or class_lookup(cls, "__contains__") is not _MISSING:
        return None
    iterator = iterator_of(tx, container)
    while (candidate := iterator.next_item(tx)) is not None:
        if identical(candidate, item) is True or compare_op(tx, "==", candidate, item).truth(tx):
            return True
    return False


def old_sequence_iterator(tx, value: Value) -> Value | None:
    """``iter(obj)`` for a class with a Python ``__getitem__`` and no ``__iter__``: CPython's sequence
    iterator (``obj[0]``, ``obj[1]``... until ``IndexError`` or ``StopIteration``), or None."""
    cls = user_class(value)
    if cls is None or class_lookup(cls, "__iter__") is not _MISSING \
            or type(class_lookup(cls, "__getitem__")) is not types.FunctionType:
        return None
    return SequenceIterator(value)


class SequenceIterator(PullIterator):
    """CPython's ``iterator`` object over ``__getitem__``: each ``next()`` calls ``obj[i]`` (traced)."""

    def __init__(self, target: Value):
        self.target = target
        self.index = 0
        self.done = False

    def describe(self):
        return f"iterator over {self.target.describe()} by __getitem__"

    def next_item(self, tx) -> Value | None:
        from .exceptions import PythonError
        from .operators import call_dunder

        if self.done:
            return None
        try:
            item = call_dunder(tx, self.target, "__getitem__", [ConstantValue(self.index)], "iteration")
        except PythonError as e:
            if issubclass(e.exception.cls, (IndexError, StopIteration)):
                self.done = True
                return None
            raise
        self.index += 1
        return item


_CONVERSIONS = {1: str, 2: repr, 3: ascii}


def format_value(tx, value: Value, conversion: int, spec: str) -> Value | None:
    """``FORMAT_VALUE`` (an f-string field) on a user object: ``str``/``repr``/``ascii`` of it when the field
    converts (``!s``, ``!r``, ``!a``), then ``format(_, spec)``, as CPython's ``PyObject_Format`` runs them.
    None for other values."""
    if user_class(value) is None:
        return None
    convert = _CONVERSIONS.get(conversion)
    if convert is None:
        return ConstantValue(run_protocol(tx, value, format, "an f-string", spec))
    return ConstantValue(format(run_protocol(tx, value, convert, "an f-string"), spec))


def index_operand(tx, container: Value, index: Value) -> Value:
    """The index a subscript of a list, tuple, str, range or tensor uses: a user object's ``__index__``
    (``PyNumber_Index``, traced) when its class has one; any other index (and any other container: a dict
    hashes the object, a user class gets it as it is) unchanged."""
    import operator

    from .containers import SequenceValue
    from .tensor import TensorValue

    cls = user_class(index)
    if cls is None or class_lookup(cls, "__index__") is _MISSING:
        return index
    if isinstance(container, (SequenceValue, TensorValue)) or container.is_constant() \
            and type(container.as_constant()) in (str, bytes, range, tuple):
        return ConstantValue(run_protocol(tx, index, operator.index, "an index"))
    return index


class IdValue(Value):
    """``id(obj)``: an address, unknown at capture time.  Only comparisons between two ids are answered:
    of one object, equal; of two, unequal when the object whose id was taken first is still held (so
    both lived at once, at different addresses).  A freed object's address may be reused, as
    ``id([]) == id([])`` shows: anything else is a break."""

    def __init__(self, target: Value, taken_at: int):
        self.target = target
        self.taken_at = taken_at

    def python_type(self):
        return int

    def describe(self):
        return f"id() of {self.target.describe()}"

    def as_constant(self):
        raise GraphBreak(f"{self.describe()} is an address, not known at capture time")

    def reconstruct(self, cg):
        if self.target.source is None:
            raise GraphBreak(f"{self.describe()} is an address, not known at capture time")
        cg.call(id, self.target)

    def equals(self, tx, other: Value) -> bool:
        from .operators import identical

        if not isinstance(other, IdValue):
            raise GraphBreak(f"comparing {self.describe()} with {other.describe()}: an address is not known at "
                             "capture time")
        same = identical(self.target, other.target)
        first = self if self.taken_at <= other.taken_at else other
        if same is True:
            return True
        if same is False and held(tx, first.target):
            return False
        raise GraphBreak(f"comparing {self.describe()} with {other.describe()}: the first object may have been "
                         "freed and its address reused")


def held(tx, value: Value) -> bool:
    """Whether ``value`` is still referenced: an object of the frame (a source), or held by a local, a cell
    or the value stack of a frame being traced (inside a list, tuple or dict held there too)."""
    from .containers import DictValue, SequenceValue

    if value.source is not None:
        return True
    seen = set()

    def holds(v: Value, depth: int) -> bool:
        if v is value:
            return True
        if depth == 0 or id(v) in seen:
            return False
        seen.add(id(v))
        if isinstance(v, SequenceValue) and not type(v).__name__ == "DictViewValue":
            return any(holds(i, depth - 1) for i in v.items)
        if isinstance(v, DictValue):
            return any(holds(i, depth - 1) for i in v.items.values())
        return False

    t = tx
    while t is not None:
        roots = [*t.locals.values(), *t.stack, *(c.get(t) for c in t.cells.values())]
        if any(r is not None and holds(r, 4) for r in roots):
            return True
        t = t.parent
    return False


class TracedKey:
    """A user object as a key of a dict or member of a set of the trace: hashed once by its class's
    ``__hash__`` (traced, as CPython hashes a key when it is stored or looked up), compared by the traced
    ``==`` when the real dict or set compares it (stored key on the left, as ``dict`` does), so a real
    ``dict``/``set`` of such keys probes, orders and matches them exactly as eager's."""

    __slots__ = ("value", "hash", "ctx", "pure", "attrs")
    #: Copies of a dict or set of the trace being made (``copied``): its keys coexist, so they are distinct.
    copying = 0

    def __init__(self, tx, value: Value):
        self.value = value
        self.ctx = tx.ctx
        effects = self._effects()
        self.hash = run_protocol(tx, value, hash, "hashing a key")
        #: Whether hashing (and each comparison) changed nothing: the rebuilt dict or set hashes it again.
        self.pure = self._effects() == effects
        #: What ``__hash__`` may have read: the object's attributes when it was hashed.
        self.attrs = dict(value.attrs) if hasattr(value, "attrs") else None

    def _effects(self) -> tuple:
        return len(self.ctx.side_effects), self.ctx.mutations

    def check_rebuilt(self) -> None:
        """Before a dict or set holding this key is made again after the graph (which hashes the object
        again, and compares it on equal hashes): a break unless that is what eager saw."""
        same = self.attrs is not None and self.attrs == self.value.attrs if hasattr(self.value, "attrs") else False
        if not (self.pure and same):
            raise GraphBreak(f"a dict or set keyed by {self.value.describe()} leaves the captured code: made "
                             "again, it would hash the object again (its hash or == has effects, or the object "
                             "changed since it was hashed)")

    def __hash__(self):
        return self.hash

    def __eq__(self, other):
        from .operators import compare_op, identical, identical_by_guard

        if TracedKey.copying:
            return self is other
        if type(other) is not TracedKey and not _constant_key(other):
            return False  # a key hashed by identity (a tensor): eager compares them only on equal addresses
        tx = self.ctx.running
        right = other.value if type(other) is TracedKey else ConstantValue(other)
        # ``PyObject_RichCompareBool``: the same object is equal without a call.
        same = identical(self.value, right)
        if same is None:
            same = identical_by_guard(tx, self.value, right)
        if same is None:
            raise GraphBreak(f"comparing the keys {self.value.describe()} and {right.describe()}: whether they are "
                             "one object is not known at capture time")
        if same:
            return True
        effects = self._effects()
        equal = compare_op(tx, "==", self.value, right).truth(tx)
        if self._effects() != effects:
            self.pure = False
            if type(other) is TracedKey:
                other.pure = False
        return equal

    def __repr__(self):
        return f"<key {self.value.describe()}>"


def copied(factory, items):
    """``factory(items)``: a copy the trace makes of a dict's items.  A real dict may compare keys with equal
    hashes while it is filled; keys that coexisted are distinct, so no stand-in's ``__eq__`` is traced (eager
    makes no such copy, or clones the table without comparing)."""
    TracedKey.copying += 1
    try:
        return factory(items)
    finally:
        TracedKey.copying -= 1


def _constant_key(key) -> bool:
    from .sets import _Member

    return type(key) is not _Member


def holds_traced_keys(keys) -> bool:
    """Whether a dict's or set's keys hold a ``TracedKey`` (then they are not a Python constant)."""
    return any(type(k) is TracedKey for k in keys)


def hashed_key(tx, value: Value):
    """What a dict or set of the trace holds for the key ``value``: a constant itself, a user object whose
    class has its own Python ``__hash__`` a ``TracedKey``; None for anything else (unknown hash)."""
    if value.is_constant():
        return value.as_constant()
    cls = user_class(value)
    if cls is None or type(class_lookup(cls, "__hash__")) is not types.FunctionType:
        if cls is not None and class_lookup(cls, "__hash__") is None:
            from .exceptions import python_error

            raise python_error(TypeError, f"unhashable type: '{cls.__name__}'",
                               reason=f"{value.describe()} is unhashable (TypeError at run time)")
        return None
    return TracedKey(tx, value)


def key_value(key) -> Value:
    """The value a dict or set key of the trace stands for (``hashed_key``'s inverse)."""
    return key.value if type(key) is TracedKey else ConstantValue(key)
