"""Python's operators over values: binary, comparison, unary, ``is`` and ``in``.

Constants fold at capture time; any tensor operand makes the operator a
``call_function`` node on the ``operator`` module's function; tuple/list
concatenation and repetition build new containers.
"""
from __future__ import annotations

import collections
import operator
import types

from ..errors import GraphBreak
from .base import Value
from .constant import ConstantValue
from .deques import is_deque
from .containers import (DictValue, DictViewValue, IteratorValue, ListValue, SequenceValue, SizeValue, TupleValue,
                         holds_mutable)
from .instances import NewObjectValue
from .iterators import PullIterator, contains
from .keyed_dicts import KeyedDictValue
from .module import ModuleValue
from .numpy_ns import is_numpy_array, numpy_operator
from .enums import EnumMemberValue
from .functions import BoundMethodValue, UserFunctionValue
from .instance_dicts import NewInstanceDictValue
from .namespaces import GlobalsValue
from .protocols import IdValue, holds_traced_keys
from .objects import _MISSING as _MISSING_ATTR, ObjectValue, class_lookup
from .subclasses import NamedTupleValue
from .symbolic import SymNumberValue
from .tensor import TensorValue

BINARY = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "//": operator.floordiv,
    "%": operator.mod, "**": operator.pow, "@": operator.matmul, "&": operator.and_, "|": operator.or_,
    "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift,
    "+=": operator.iadd, "-=": operator.isub, "*=": operator.imul, "/=": operator.itruediv,
    "//=": operator.ifloordiv, "%=": operator.imod, "**=": operator.ipow, "@=": operator.imatmul,
    "&=": operator.iand, "|=": operator.ior, "^=": operator.ixor, "<<=": operator.ilshift, ">>=": operator.irshift,
}
COMPARE = {"<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt,
           ">=": operator.ge}


def binary_op(tx, symbol: str, a: Value, b: Value) -> Value:
    fn = BINARY[symbol]
    forward, reflected = _BINARY_DUNDERS[symbol.rstrip("=")]
    names = (forward, reflected, "__i" + forward[2:])
    a, b = _plain_tuple(a, names), _plain_tuple(b, names)
    if _object_class(a) is not None or _object_class(b) is not None:
        return _user_binary(tx, symbol, a, b)
    if is_numpy_array(a) or is_numpy_array(b):
        return numpy_operator(tx, fn, [a, b], f"`{symbol}`")
    if isinstance(a, TensorValue) or isinstance(b, TensorValue):
        if not isinstance(a, TensorValue):
            # `n += t` with a Python number n: Python falls back to `n + t` (and FX cannot print `0 += t`).
            fn = BINARY[symbol.rstrip("=")]
        return tx.graph.call("call_function", fn, [a, b], {}, f"`{symbol}`")
    if isinstance(a, DictViewValue) or isinstance(b, DictViewValue):
        # Views answer as real views (``d.keys() | {5}`` is a set; ``+`` raises as in Python).
        if not (a.is_constant() and b.is_constant()):
            raise GraphBreak(f"`{symbol}` on a dict view of non-constant values")
        return _fold(fn, symbol, a, b)
    if symbolic_numbers(a, b):
        # A size stays symbolic through arithmetic; Python numbers have no in-place forms.
        return tx.graph.call("call_function", BINARY[symbol.rstrip("=")], _ints(a, b), {}, f"`{symbol}`")
    # ``str % x`` only reads ``x`` (a new string; a dict or list operand is never changed nor returned).
    formats = symbol in ("%", "%=") and a.is_constant() and type(a.as_constant()) in (str, bytes)
    # A text needs the numbers' values: formatting a symbolic one specializes it, as ``"%s" % k`` does.
    if a.is_constant() and b.is_constant() and not (holds_mutable(a) or holds_mutable(b) and not formats) \
            and (formats or not (holds_symbolic(a) or holds_symbolic(b))):
        return _fold(fn, symbol, a, b)
    if isinstance(a, DictValue) and symbol in ("|", "|="):
        from .container_methods import dict_union

        return dict_union(tx, symbol, a, b)
    if is_deque(a) or is_deque(b):
        raise GraphBreak(f"`{symbol}` between {a.describe()} and {b.describe()} is not supported")
    base = symbol.rstrip("=")
    if isinstance(a, SequenceValue) and isinstance(b, ConstantValue) and type(b.value) is tuple:
        b = TupleValue([ConstantValue(x) for x in b.value])  # `x.shape[:-1] + (2, -1)` with a symbolic size
    elif isinstance(b, SequenceValue) and isinstance(a, ConstantValue) and type(a.value) is tuple:
        a = TupleValue([ConstantValue(x) for x in a.value])
    if isinstance(a, SequenceValue) and isinstance(b, SequenceValue) and base == "+":
        if symbol == "+=" and isinstance(a, ListValue):
            a.mutate(tx, "`+=` on a list")
            a.items.extend(b.items)
            return a
        if isinstance(a, ListValue) != isinstance(b, ListValue):
            raise GraphBreak("`+` between a list and a tuple (TypeError at run time)")
        sized = isinstance(a, SizeValue) or isinstance(b, SizeValue)  # tuple + torch.Size is a torch.Size
        cls = ListValue if isinstance(a, ListValue) else SizeValue if sized else TupleValue
        return cls(a.items + b.items)
    if isinstance(a, SequenceValue) and base == "*" and b.is_constant():
        count = b.as_constant()
        if not isinstance(count, int):  # bools are ints, as in Python
            raise GraphBreak(f"can't multiply sequence by non-int of type {type(count).__name__!r} "
                             "(TypeError at run time)")
        cls = ListValue if isinstance(a, ListValue) else TupleValue
        return cls(a.items * count)
    raise GraphBreak(f"`{symbol}` between {a.describe()} and {b.describe()} is not supported")


def _fold(fn, symbol: str, a: Value, b: Value) -> Value:
    """``a <symbol> b`` evaluated on the constants, at capture time."""
    try:
        result = fn(a.as_constant(), b.as_constant())
    except Exception as e:
        from .exceptions import from_real

        raise from_real(e, f"`{symbol}` raised {type(e).__name__}: {e}") from None
    from .wrap import wrap_constant_result

    return wrap_constant_result(result, f"`{symbol}`")


def compare_op(tx, symbol: str, a: Value, b: Value) -> Value:
    fn = COMPARE[symbol]
    names = _ORDERING.get(symbol, ("__eq__", "__ne__"))
    a, b = _plain_tuple(a, names), _plain_tuple(b, names)
    if is_numpy_array(a) or is_numpy_array(b):
        return numpy_operator(tx, fn, [a, b], f"`{symbol}`")
    if isinstance(a, TensorValue) or isinstance(b, TensorValue):
        return tx.graph.call("call_function", fn, [a, b], {}, f"`{symbol}`")
    if symbolic_numbers(a, b):
        return tx.graph.call("call_function", fn, _ints(a, b), {}, f"`{symbol}`")
    if a.is_constant() and b.is_constant():
        return ConstantValue(fn(a.as_constant(), b.as_constant()))
    if symbol in _ORDERING and (_object_class(a) is not None or _object_class(b) is not None):
        return _user_dispatch(tx, f"`{symbol}`", a, b, *_ORDERING[symbol])
    if symbol in ("==", "!=") and isinstance(a, BoundMethodValue) and isinstance(b, BoundMethodValue):
        # ``method_richcompare``: the same function bound to the same object (``im_self`` by identity).
        same = [identical(a.function, b.function), identical(a.self_value, b.self_value)]
        if same[1] is None:
            same[1] = identical_by_guard(tx, a.self_value, b.self_value)
        if None in same:
            raise GraphBreak(f"comparing {a.describe()} {symbol} {b.describe()} cannot be decided while capturing")
        return ConstantValue(all(same) if symbol == "==" else not all(same))
    if symbol in ("==", "!=") and (isinstance(a, IdValue) or isinstance(b, IdValue)):
        same = (a if isinstance(a, IdValue) else b).equals(tx, b if isinstance(a, IdValue) else a)
        return ConstantValue(same if symbol == "==" else not same)
    if symbol in ("==", "!="):
        if _defines_equality(a) or _defines_equality(b):
            return _rich_equality(tx, symbol, a, b)
        real_a, real_b = _real_constant(a), _real_constant(b)
        if real_a is not _UNKNOWN and real_b is not _UNKNOWN:
            return ConstantValue(fn(real_a, real_b))
        from .container_methods import sequences_equal

        equal = sequences_equal(tx, a, b)
        if equal is not None:
            return ConstantValue(equal == (symbol == "=="))
        if isinstance(a, DictValue) and isinstance(b, DictValue):
            if a.dict_type is b.dict_type is collections.OrderedDict:
                ordered = _ordered_dict_equality(tx, symbol, a, b)
                if ordered is not None:
                    return ordered
            else:
                return _dict_equality(tx, "__eq__" if symbol == "==" else "__ne__", a, b)
        same = identical(a, b)
        if same is True or same is False and _equal_only_if_identical(a, b):
            return ConstantValue(same if symbol == "==" else not same)
    raise GraphBreak(f"comparing {a.describe()} {symbol} {b.describe()} is not supported")


_UNKNOWN = object()


def _real_constant(v: Value):
    """The object ``v`` stands for, rebuilt from constants so that ``==`` can run on it (a dict keeps its
    type: an OrderedDict compares in order with another one); ``_UNKNOWN`` when it holds other values."""
    try:
        if v.is_constant():
            return v.as_constant()
        if isinstance(v, DictValue) and all(item.is_constant() for item in v.items.values()) \
                and v.dict_type in (dict, collections.OrderedDict, collections.defaultdict) \
                and not holds_traced_keys(v.items):
            items = {k: item.as_constant() for k, item in v.items.items()}
            return collections.OrderedDict(items) if v.dict_type is collections.OrderedDict else items
        if isinstance(v, DictViewValue) and _real_constant(v.dict_value) is not _UNKNOWN:
            return getattr(dict(_real_constant(v.dict_value)), v.kind)()
    except GraphBreak:
        pass
    return _UNKNOWN


def _equal_only_if_identical(a: Value, b: Value) -> bool:
    """Whether two objects that are not the same one are unequal: neither type compares contents
    (``object.__eq__`` on both sides, or a built-in scalar against a user object)."""
    def by_identity(v, other):
        cls = _object_class(v)
        if cls is not None:
            return not _defines_equality(v)
        if v.is_constant() and type(v.as_constant()) in _SCALARS:
            return _object_class(other) is not None
        return isinstance(v, (ModuleValue,))
    return by_identity(a, b) and by_identity(b, a)


_OBJECT_EQ, _OBJECT_NE = object.__dict__["__eq__"], object.__dict__["__ne__"]
#: Built-in types whose ``==`` answers NotImplemented for an object of a user class.
_SCALARS = (int, float, complex, str, bytes, bool, type(None))


def _object_class(v: Value) -> type | None:
    """The class of a user object (made in the trace or read from the frame), else None."""
    return v.python_type() if isinstance(v, (NewObjectValue, ObjectValue, EnumMemberValue, NamedTupleValue)) \
        and not v.is_constant() else None


def _defines_equality(v: Value) -> bool:
    """A user object whose class has an ``__eq__`` or ``__ne__`` of its own: ``==`` is not identity."""
    cls = _object_class(v)
    return cls is not None and (class_lookup(cls, "__eq__") is not _OBJECT_EQ
                                or class_lookup(cls, "__ne__") is not _OBJECT_NE)


def _rich_equality(tx, symbol: str, a: Value, b: Value) -> Value:
    """``a == b`` / ``a != b`` by CPython's protocol: the left operand's method, then the right one's
    (first when its class is a subclass overriding it), then identity; methods in Python are inlined."""
    name = "__eq__" if symbol == "==" else "__ne__"
    order = [(a, b), (b, a)]
    ca, cb = _object_class(a), _object_class(b)
    if ca is not None and cb is not None and cb is not ca and issubclass(cb, ca) \
            and class_lookup(cb, name) is not class_lookup(ca, name):
        order.reverse()
    for left, right in order:
        result = _equality_method(tx, name, left, right)
        if not (result.is_constant() and result.as_constant() is NotImplemented):
            return result
    same = identical(a, b)
    if same is None:
        raise GraphBreak(f"comparing {a.describe()} {symbol} {b.describe()} cannot be decided while capturing")
    return ConstantValue(same if symbol == "==" else not same)


def _equality_method(tx, name: str, left: Value, right: Value) -> Value:
    """What ``type(left).<name>(left, right)`` returns (NotImplemented included)."""
    if left.is_constant() and type(left.as_constant()) in _SCALARS:
        return ConstantValue(NotImplemented)  # `right` is a user object: not of the scalar's type
    cls = _object_class(left)
    method = class_lookup(cls, name) if cls is not None else None
    if method is _OBJECT_EQ:
        return ConstantValue(True) if identical(left, right) else ConstantValue(NotImplemented)
    if method is _OBJECT_NE:
        # object.__ne__ inverts the class's own __eq__, unless that is NotImplemented.
        result = _equality_method(tx, "__eq__", left, right)
        if result.is_constant() and result.as_constant() is NotImplemented:
            return result
        return ConstantValue(not result.truth(tx))
    if type(method) is types.FunctionType:
        return _call_method(tx, left, name, [right], f"`{name}`")
    if method in _DICT_EQUALITY or cls is None and isinstance(left, DictValue) \
            and left.dict_type is not collections.OrderedDict:
        return _dict_equality(tx, name, left, right)
    if type(method) is types.WrapperDescriptorType and method.__objclass__ in _SCALARS:
        # A built-in scalar base's own ``==`` (``str.__eq__`` of a ``str``-valued enum member) runs no user code:
        # run for real on the two objects when both are known ones (NotImplemented for another kind).
        try:
            return ConstantValue(method(left.real_object(), right.real_object()))
        except GraphBreak:
            pass
    raise GraphBreak(f"`{name}` of {left.describe()} is not a Python function; `==` on it is not captured")


_DICT_EQUALITY = (dict.__dict__["__eq__"], dict.__dict__["__ne__"])


def _dict_items(tx, v: Value) -> dict | None:
    """The items of a dict or dict subclass object, by key; None when ``v`` is not a dict (a break when it
    is one whose items are not known)."""
    from .subclasses import NewDictObjectValue, frame_items

    if isinstance(v, DictValue):
        return v.items
    if isinstance(v, NewDictObjectValue):
        return v.storage.items
    cls = _object_class(v)
    if cls is None or not issubclass(cls, dict):
        return None
    if isinstance(v, ObjectValue) and v.source is not None:
        return frame_items(tx, v).items
    raise GraphBreak(f"comparing {v.describe()} as a dict: its items are not known while capturing")


def _dict_equality(tx, name: str, left: Value, right: Value) -> Value:
    """``dict.__eq__``/``__ne__`` (``dict_richcompare``): NotImplemented for a non-dict; else equal lengths, and
    each key of ``left`` looked up in ``right`` (one real lookup) with values compared as
    ``PyObject_RichCompareBool(left value, right value)`` in ``left``'s order."""
    from .container_methods import same_or_equal
    from .containers import ABSENT

    a, b = _dict_items(tx, left), _dict_items(tx, right)
    if b is None:
        return ConstantValue(NotImplemented)
    equal = len(a) == len(b)
    for key, value in a.items() if equal else ():
        found = b.get(key, ABSENT)
        if found is ABSENT or not same_or_equal(tx, value, found):
            equal = False
            break
    return ConstantValue(equal == (name == "__eq__"))


def _ordered_dict_equality(tx, symbol: str, a: DictValue, b: DictValue) -> Value | None:
    """``odict_richcompare`` of two OrderedDicts: ``dict``'s answer, then (when it says equal) their keys
    compared pair by pair in order with ``==``; None for keys made of traced objects."""
    if holds_traced_keys(a.items) or holds_traced_keys(b.items):
        return None
    result = _dict_equality(tx, "__eq__" if symbol == "==" else "__ne__", a, b)
    if result.as_constant() != (symbol == "=="):  # not equal as dicts
        return result
    same_order = all(bool(x == y) for x, y in zip(a.items, b.items))
    return ConstantValue(same_order == (symbol == "=="))


def _plain_tuple(v: Value, names) -> Value:
    """A named tuple whose class keeps tuple's own methods ``names`` (``+``, ``==``): for that operator it is
    the plain tuple of its items, as tuple's C method sees it (its result a plain tuple)."""
    if isinstance(v, NamedTupleValue) and all(class_lookup(v.cls, n) is class_lookup(tuple, n) for n in names):
        return TupleValue(list(v.items))
    return v


def holds_symbolic(v: Value) -> bool:
    """A tuple (``x.shape``) with a symbolic item: folding it as a constant would specialize the item."""
    return isinstance(v, SequenceValue) and any(isinstance(i, SymNumberValue) for i in v.items)


def symbolic_numbers(a: Value, b: Value) -> bool:
    """Whether an operator on ``a`` and ``b`` is arithmetic on symbolic numbers (and Python numbers)."""
    def number(v):
        return isinstance(v, SymNumberValue) or (isinstance(v, ConstantValue) and type(v.value) in (int, float, bool))

    return (isinstance(a, SymNumberValue) or isinstance(b, SymNumberValue)) and number(a) and number(b)


def _ints(*values: Value) -> list[Value]:
    """Bool constants as the ints they are in arithmetic (``s != True`` is ``s != 1``; sympy has no bools there)."""
    return [ConstantValue(int(v.value)) if isinstance(v, ConstantValue) and type(v.value) is bool else v
            for v in values]


#: Value kinds whose ``python_type()`` is the runtime object's exact type (others may stand for an object
#: of a type they do not know: a method of a constant, a proxy).
_EXACT_TYPE = (ConstantValue, ListValue, TupleValue, DictValue, ObjectValue, ModuleValue, SymNumberValue)


def identical(a: Value, b: Value) -> bool | None:
    """``a is b`` when it can be decided at capture time, else None."""
    if a is b:
        return True
    from .exceptions import ExceptionValue

    if isinstance(a, ExceptionValue) or isinstance(b, ExceptionValue):
        return False  # made by the trace: one Value wherever it is held (as a NewObjectValue)
    if isinstance(a, TensorValue) and isinstance(b, TensorValue):
        return a.node is b.node
    if isinstance(a, TensorValue) or isinstance(b, TensorValue):
        return False
    if isinstance(a, NewObjectValue) or isinstance(b, NewObjectValue):
        # Made by the trace: one Value wherever it is held, and nothing that existed before.
        return False
    if isinstance(a, UserFunctionValue) and isinstance(b, UserFunctionValue) \
            and (a.made is not None or b.made is not None):
        return a.fn is b.fn  # ``MAKE_FUNCTION`` in the trace makes a new function: only itself is it
    if _made_container(a) and _made_container(b) or _made_container(a) and b.source is not None \
            or _made_container(b) and a.source is not None:
        # A list or dict made by the trace is a new object, one Value wherever it is held.
        return False
    from .container_methods import known_distinct

    if known_distinct(a, b):
        return False  # one value per container of the frame, and the trace's own are new (collections 5)
    if isinstance(a, _EXACT_TYPE) and isinstance(b, _EXACT_TYPE) and a.python_type() is not b.python_type():
        return False  # one object has one type
    if a.is_constant() and b.is_constant() and not isinstance(a, (SequenceValue, DictValue)) \
            and not isinstance(b, (SequenceValue, DictValue)):
        return a.as_constant() is b.as_constant()
    try:
        return a.real_object() is b.real_object()
    except GraphBreak:
        pass
    if a is b:
        return True
    if isinstance(a, ConstantValue) or isinstance(b, ConstantValue):
        return False
    return None


def _made_container(v: Value) -> bool:
    """A list or dict the trace made (``[1]``, ``dict(a=1)``), not one read from the frame."""
    return type(v) in (ListValue, DictValue) and v.source is None


def identical_by_guard(tx, a: Value, b: Value) -> bool | None:
    """``a is b`` for objects read from the frame whose identities are not guarded (plain objects
    guarded by type, such as a sentinel in a module's globals): the answer of the objects seen now,
    guarded as a relation between their sources, or, when only one has a source, between it and the
    other object (one the trace holds without a path, such as a field of a dataclass it made).  None
    when neither has a source, or either is not a plain object."""
    if not (isinstance(a, ObjectValue) and isinstance(b, ObjectValue)) or a.source is None and b.source is None:
        return None
    same = a.obj is b.obj
    if a.source is not None and b.source is not None:
        tx.guards.relation(f"({a.source.expr()} is {b.source.expr()}) is {same}", [a.source, b.source],
                           f"{a.source.expr()} is {'' if same else 'not '}{b.source.expr()}")
        return same
    sourced, held = (a, b) if a.source is not None else (b, a)
    tx.guards.add("EQUALS_MATCH", sourced.source, f"({{s}} is {{o}}) is {same}",
                  f"{sourced.source.expr()} is {'' if same else 'not '}{held.describe()}", o=held.obj)
    return same


def contains_op(tx, item: Value, container: Value) -> bool:
    """``item in container`` decided at capture time (pulling a lazy iterator as eager does)."""
    if isinstance(container, SizeValue) or container.is_constant() and item.is_constant():
        return item.as_constant() in container.as_constant()
    if isinstance(container, DictValue) and item.is_constant():
        return item.as_constant() in container.items
    if isinstance(container, DictValue):
        from .containers import dict_key

        container.refuse_tensor_key(item)
        return dict_key(tx, item) in container.items
    if isinstance(container, KeyedDictValue):
        return container.contains(tx, item).as_constant()
    if isinstance(container, GlobalsValue):
        return container.contains(tx, item)
    if isinstance(container, SequenceValue):
        matches = [identical(item, x) if not (item.is_constant() and x.is_constant())
                   else item.as_constant() == x.as_constant() for x in container.items]
        if any(m is None for m in matches):
            raise GraphBreak(f"`in` over {container.describe()} cannot be decided while capturing")
        return any(matches)
    if isinstance(container, (IteratorValue, PullIterator)):
        return contains(tx, item, container)
    if isinstance(container, (ObjectValue, NewInstanceDictValue)):
        # CPython calls bool() on what __contains__ returns.
        return container.contains(tx, item).truth(tx)
    raise GraphBreak(f"`in` over {container.describe()} is not supported")


def unary_op(tx, symbol: str, fn, value: Value) -> Value:
    """A unary operator (``-x``, ``+x``, ``~x``) on one value."""
    if _object_class(value) is not None:
        return call_dunder(tx, value, _UNARY_DUNDERS[symbol], [], f"unary `{symbol}`")
    if is_numpy_array(value):
        return numpy_operator(tx, fn, [value], f"unary `{symbol}`")
    if isinstance(value, (TensorValue, SymNumberValue)):
        return tx.graph.call("call_function", fn, [value], {}, f"unary `{symbol}`")
    if value.is_constant():
        return ConstantValue(fn(value.as_constant()))
    raise GraphBreak(f"unary `{symbol}` on {value.describe()}")



#: Binary operator -> (method, reflected method), CPython's ``nb_*`` slots.
_BINARY_DUNDERS = {
    "+": ("__add__", "__radd__"), "-": ("__sub__", "__rsub__"), "*": ("__mul__", "__rmul__"),
    "/": ("__truediv__", "__rtruediv__"), "//": ("__floordiv__", "__rfloordiv__"), "%": ("__mod__", "__rmod__"),
    "**": ("__pow__", "__rpow__"), "@": ("__matmul__", "__rmatmul__"), "&": ("__and__", "__rand__"),
    "|": ("__or__", "__ror__"), "^": ("__xor__", "__rxor__"), "<<": ("__lshift__", "__rlshift__"),
    ">>": ("__rshift__", "__rrshift__"),
}
#: Ordering comparison -> (method, reflected method).
_ORDERING = {"<": ("__lt__", "__gt__"), "<=": ("__le__", "__ge__"), ">": ("__gt__", "__lt__"),
             ">=": ("__ge__", "__le__")}
_UNARY_DUNDERS = {"-": "__neg__", "+": "__pos__", "~": "__invert__"}
#: ``object``'s ordering methods (they answer NotImplemented to any other object).
_OBJECT_SLOTS = {name: object.__dict__[name] for name in ("__lt__", "__le__", "__gt__", "__ge__")}


def _user_binary(tx, symbol: str, a: Value, b: Value) -> Value:
    """``a <symbol> b`` with a user object on either side: CPython's ``binary_op1`` over their methods
    (``__iadd__`` first for ``+=``, then ``__add__``, then the right operand's ``__radd__``)."""
    base = symbol.rstrip("=")
    forward, reflected = _BINARY_DUNDERS[base]
    if symbol != base and _object_class(a) is not None:
        result = _method_result(tx, a, "__i" + forward[2:], b)
        if not _is_not_implemented(result):
            return result
    return _user_dispatch(tx, f"`{symbol}`", a, b, forward, reflected)


def _user_dispatch(tx, what: str, a: Value, b: Value, forward: str, reflected: str) -> Value:
    """The left operand's ``forward`` method, then the right one's ``reflected`` (first when its class is
    a proper subclass of the left's that overrides it); both NotImplemented is a TypeError."""
    order = [(a, forward, b), (b, reflected, a)]
    ca, cb = _object_class(a), _object_class(b)
    if ca is not None and cb is not None and cb is not ca and issubclass(cb, ca) \
            and class_lookup(cb, reflected) is not class_lookup(ca, reflected):
        order.reverse()
    for left, name, right in order:
        result = _method_result(tx, left, name, right)
        if not _is_not_implemented(result):
            return result
    raise GraphBreak(f"{what} between {a.describe()} and {b.describe()}: no method of theirs answers (TypeError "
                     "at run time)")


def _is_not_implemented(result: Value | None) -> bool:
    return result is None or result.is_constant() and result.as_constant() is NotImplemented


def _method_result(tx, value: Value, name: str, other: Value) -> Value | None:
    """What ``type(value).<name>(value, other)`` returns; None where the class has no such method (or, for
    a value that is not a user object, where its type answers NotImplemented to a user object)."""
    cls = _object_class(value)
    if cls is None:
        if value.is_constant() and type(value.as_constant()) in _SCALARS or isinstance(value, TensorValue):
            if isinstance(value, TensorValue) and _object_class(other) is not None \
                    and class_lookup(_object_class(other), "__torch_function__") is not _MISSING_ATTR:
                raise GraphBreak(f"an operator between a tensor and {other.describe()}, which has a "
                                 "__torch_function__")
            return None  # int.__add__(3, obj) and Tensor.__add__(t, obj) answer NotImplemented
        raise GraphBreak(f"an operator between {value.describe()} and {other.describe()} is not supported")
    return call_dunder(tx, value, name, [other], f"`{name}`", missing_ok=True)


def call_dunder(tx, value: Value, name: str, args: list[Value], what: str, missing_ok: bool = False):
    """``type(value).<name>(value, *args)`` for a user object whose class defines it in Python (inlined);
    None when it is missing and ``missing_ok``; a break for a C method or a missing one."""
    cls = _object_class(value)
    method = class_lookup(cls, name)
    if method is _MISSING_ATTR or method is None:
        if missing_ok:
            return None
        raise GraphBreak(f"{what} on {value.describe()}: its class has no {name} (TypeError at run time)")
    if method is _OBJECT_SLOTS.get(name):
        if missing_ok:
            return ConstantValue(NotImplemented)  # object's own rich comparisons answer NotImplemented
        raise GraphBreak(f"{what} on {value.describe()}: its class has no {name} (TypeError at run time)")
    if type(method) is not types.FunctionType:
        raise GraphBreak(f"{what} on {value.describe()}: its {name} is a {type(method).__name__}, not a Python "
                         "function")
    return _call_method(tx, value, name, list(args), what)


def _call_method(tx, value: Value, name: str, args: list[Value], what: str) -> Value:
    """The class's Python method ``name`` on ``value``: looked up on the type, as CPython's slots are (an
    instance attribute of that name changes nothing); enum members and named tuples bind their own."""
    if isinstance(value, ObjectValue):
        return value.call_special(tx, name, args, what)
    return value.getattr(tx, name).call(tx, args, {})
