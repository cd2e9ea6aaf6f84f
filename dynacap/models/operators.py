"""``operator``'s functions and callables, written in Python: traced in place of the C ones.

Each model does what the C function does, by the same Python operation (``a += b`` calls
``__iadd__`` and falls back to ``__add__`` as ``operator.iadd`` does), so the interpreter's own
semantics of the operation apply.  ``itemgetter``/``attrgetter``/``methodcaller`` return a function
made in the trace; one that leaves the graph is made again as the real C object from its cells
(``values.functions._rebuilt_as``).
"""
from __future__ import annotations

import builtins
import operator


# -- comparisons and truth -------------------------------------------------------------------------------------------
def lt(a, b, /):
    return a < b


def le(a, b, /):
    return a <= b


def eq(a, b, /):
    return a == b


def ne(a, b, /):
    return a != b


def ge(a, b, /):
    return a >= b


def gt(a, b, /):
    return a > b


def not_(a, /):
    return not a


def truth(a, /):
    return True if a else False


def is_(a, b, /):
    return a is b


def is_not(a, b, /):
    return a is not b


# -- arithmetic -------------------------------------------------------------------------------------------------------
def abs(a, /):
    return builtins.abs(a)


def add(a, b, /):
    return a + b


def and_(a, b, /):
    return a & b


def floordiv(a, b, /):
    return a // b


def inv(a, /):
    return ~a


def lshift(a, b, /):
    return a << b


def mod(a, b, /):
    return a % b


def mul(a, b, /):
    return a * b


def matmul(a, b, /):
    return a @ b


def neg(a, /):
    return -a


def or_(a, b, /):
    return a | b


def pos(a, /):
    return +a


def pow(a, b, /):
    return a ** b


def rshift(a, b, /):
    return a >> b


def sub(a, b, /):
    return a - b


def truediv(a, b, /):
    return a / b


def xor(a, b, /):
    return a ^ b


# -- sequences ----------------------------------------------------------------------------------------------------------
def _check_sequence(a):
    if not hasattr(type(a), "__getitem__") or isinstance(a, dict):
        raise TypeError(f"'{type(a).__name__}' object can't be concatenated")


def concat(a, b, /):
    _check_sequence(a)
    return a + b


def contains(a, b, /):
    return b in a


def countOf(a, b, /):
    return sum(1 for item in a if item is b or item == b)


def indexOf(a, b, /):
    for i, item in enumerate(a):
        if item is b or item == b:
            return i
    raise ValueError("sequence.index(x): x not in sequence")


def getitem(a, b, /):
    return a[b]


def setitem(a, b, c, /):
    a[b] = c


def delitem(a, b, /):
    del a[b]


def length_hint(obj, default=0, /):
    # Lib/operator.py's walk: ``len()`` (when the type has one), then the type's ``__length_hint__``.
    if not isinstance(default, int):
        raise TypeError(f"'{type(default).__name__}' object cannot be interpreted as an integer")
    if hasattr(type(obj), "__len__"):
        try:
            return len(obj)
        except TypeError:
            pass
    try:
        hint = type(obj).__length_hint__
    except AttributeError:
        return default
    try:
        value = hint(obj)
    except TypeError:
        return default
    if value is NotImplemented:
        return default
    if not isinstance(value, int):
        raise TypeError(f"__length_hint__ must be an integer, not {type(value).__name__}")
    if value < 0:
        raise ValueError("__length_hint__() should return >= 0")
    return value


def call(obj, /, *args, **kwargs):
    return obj(*args, **kwargs)


# -- in place: the statement calls ``__iadd__`` and falls back to ``__add__``, as ``operator.iadd`` does ---------------
def iadd(a, b, /):
    a += b
    return a


def iand(a, b, /):
    a &= b
    return a


def iconcat(a, b, /):
    _check_sequence(a)
    a += b
    return a


def ifloordiv(a, b, /):
    a //= b
    return a


def ilshift(a, b, /):
    a <<= b
    return a


def imod(a, b, /):
    a %= b
    return a


def imul(a, b, /):
    a *= b
    return a


def imatmul(a, b, /):
    a @= b
    return a


def ior(a, b, /):
    a |= b
    return a


def ipow(a, b, /):
    a **= b
    return a


def irshift(a, b, /):
    a >>= b
    return a


def isub(a, b, /):
    a -= b
    return a


def itruediv(a, b, /):
    a /= b
    return a


def ixor(a, b, /):
    a ^= b
    return a


# -- callables: functions made in the trace (leaving it, made again as the C objects: values.functions) ------------
def itemgetter(*items):
    if not items:
        raise TypeError("itemgetter expected 1 argument, got 0")
    if len(items) == 1:
        item = items[0]

        def get_item(obj):
            return obj[item]

        return get_item

    def get_items(obj):
        return tuple([obj[item] for item in items])

    return get_items


def attrgetter(*attrs):
    if not attrs:
        raise TypeError("attrgetter expected 1 argument, got 0")
    for attr in attrs:
        if not isinstance(attr, str):
            raise TypeError("attribute name must be a string")
    paths = [attr.split(".") for attr in attrs]
    if len(paths) == 1:
        path = paths[0]

        def get_attr(obj):
            return _resolve(obj, path)

        return get_attr

    def get_attrs(obj):
        return tuple([_resolve(obj, path) for path in paths])

    return get_attrs


def _resolve(obj, path):
    for name in path:
        obj = getattr(obj, name)
    return obj


def methodcaller(*args, **kwargs):
    if not args:
        raise TypeError("methodcaller needs at least one argument, the method name")
    name, args = args[0], args[1:]
    if not isinstance(name, str):
        raise TypeError("method name must be a string")

    def call_method(obj):
        return getattr(obj, name)(*args, **kwargs)

    return call_method


_FUNCTIONS = ("lt", "le", "eq", "ne", "ge", "gt", "not_", "truth", "is_", "is_not", "abs", "add", "and_",
              "floordiv", "inv", "lshift", "mod", "mul", "matmul", "neg", "or_", "pos", "pow", "rshift", "sub",
              "truediv", "xor", "concat", "contains", "countOf", "indexOf", "getitem", "setitem", "delitem",
              "length_hint", "call", "iadd", "iand", "iconcat", "ifloordiv", "ilshift", "imod", "imul", "imatmul",
              "ior", "ipow", "irshift", "isub", "itruediv", "ixor")

#: What this file models, read by ``trace_rules``: dotted name -> (model, why the model is faithful).
#: ``operator``'s functions are C functions of ``_operator`` (``invert`` is ``inv``, ``__add__`` is ``add``...).
MODELS = {
    **{f"_operator.{name}": (globals()[name], "the same Python operation") for name in _FUNCTIONS},
    "_operator.invert": (inv, "the same Python operation"),
    **{f"operator.{name}": (globals()[name], "a function made in the trace that does what its __call__ does")
       for name in ("itemgetter", "attrgetter", "methodcaller")},
}

#: C callables whose objects' call is modelled, read by ``values.functions`` for objects from the frame:
#: class -> the model of its constructor, called with the object's ``__reduce__`` arguments.
INSTANCE_CALLS = {
    operator.itemgetter: itemgetter,
    operator.attrgetter: attrgetter,
    operator.methodcaller: methodcaller,
}
