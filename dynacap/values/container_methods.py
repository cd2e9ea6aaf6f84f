"""Methods of lists, dicts and deques run by the real C method on a real container of the item values.

``list.insert``, ``dict.popitem``, ``OrderedDict.move_to_end``, ``deque.rotate``... only move items
around: run on a real ``list``/``dict``/``deque`` holding the trace's ``Value``s, they give CPython's
order, its survivor and its errors (``pop from an empty deque``) with no code of ours to get wrong.
Methods that compare items (``remove``, ``index``, ``count``) compare them here as CPython does,
identity first, then ``==`` (``same_or_equal``).  Keys, indices and counts must be constants.
Nothing here emits graph nodes but the ``==`` of items that are tensors.
"""
from __future__ import annotations

from ..errors import GraphBreak
from .base import Value
from .constant import ConstantValue
from .methods import MethodOfValue

#: Per method, how each positional argument is passed: "v" the value itself, "c" its constant,
#: "i" its items (an iterable).  Keyword arguments are constants.
ARGUMENTS = {
    "append": "v", "appendleft": "v", "extend": "i", "extendleft": "i", "insert": "cv", "pop": "c",
    "popleft": "", "rotate": "c", "reverse": "", "clear": "", "copy": "",
    "popitem": "c", "move_to_end": "cc", "setdefault": "cv",
}
#: Methods that leave the container as it was.
READING = frozenset({"copy"})
#: Methods that compare items with the argument (CPython's ``PyObject_RichCompareBool``).
COMPARING = frozenset({"remove", "index", "count"})


class ItemsMethodValue(MethodOfValue):
    """``owner.name`` for a method of a list, dict or deque value run as the real method (see the module)."""

    def call(self, tx, args, kwargs):
        kind = self.owner.python_type().__name__
        if self.name in COMPARING:
            return _comparing(tx, self.owner, self.name, args, kwargs, f"{kind}.{self.name}")
        spec = ARGUMENTS[self.name]
        if len(args) > len(spec) or not all(v.is_constant() for v in kwargs.values()):
            raise GraphBreak(f"{self.describe()} with these arguments")
        passed = [_argument(tx, how, a, self.describe()) for how, a in zip(spec, args)]
        real = self.owner.real_items()
        try:
            result = getattr(real, self.name)(*passed, **{k: v.as_constant() for k, v in kwargs.items()})
        except Exception as e:
            from .exceptions import from_real

            raise from_real(e, f"{kind}.{self.name}() raised {type(e).__name__}: {e} (at run time too)") from None
        if self.name in READING:
            return self.owner.like_items(result)
        self.owner.mutate_items(tx, real, self.name, passed)
        return as_value(result)


def _argument(tx, how: str, value: Value, what: str):
    if how == "v":
        return value
    if how == "i":
        from .objects import all_items

        return all_items(tx, value)
    if not value.is_constant():
        raise GraphBreak(f"{what} with an argument known only at run time ({value.describe()})")
    return value.as_constant()


def as_value(result) -> Value:
    """A real method's result: a value it moved, a (key, value) pair, or a constant."""
    if isinstance(result, Value):
        return result
    if type(result) is tuple:
        from .containers import TupleValue

        return TupleValue([as_value(r) for r in result])
    return ConstantValue(result)


def same_or_equal(tx, a: Value, b: Value) -> bool:
    """``PyObject_RichCompareBool(a, b, Py_EQ)``: the same object, else the truth of ``a == b``."""
    from .operators import compare_op, identical

    if identical(a, b) is True:
        return True
    return compare_op(tx, "==", a, b).truth(tx)


def _comparing(tx, owner, name: str, args, kwargs, what: str) -> Value:
    """``remove(x)``, ``index(x[, start[, stop]])``, ``count(x)``: items compared in order, as CPython does."""
    arity = {"remove": (1, 1), "count": (1, 1), "index": (1, 3)}[name]
    if kwargs or not arity[0] <= len(args) <= arity[1]:
        raise GraphBreak(f"{what}() with these arguments (TypeError at run time)")
    target, bounds = args[0], [a.as_constant() for a in args[1:]]
    items = owner.items
    if name == "count":
        return ConstantValue(sum(same_or_equal(tx, item, target) for item in items))
    start, stop = (bounds + [None, None])[:2]
    positions = range(len(items))[start:stop]
    for i in positions:
        if same_or_equal(tx, items[i], target):
            if name == "index":
                return ConstantValue(i)
            real = owner.real_items()
            del real[i]
            owner.mutate_items(tx, real, name, [target])
            return ConstantValue(None)
    # The message of the real method missing the item ("list.remove(x): x not in list", "3 is not in deque").
    probe = target.as_constant() if target.is_constant() else object()
    try:
        getattr(owner.python_type()(), name)(probe)
    except ValueError as e:
        message = str(e)
    if not target.is_constant() and "object at 0x" in message:
        raise GraphBreak(f"{what}(): the item is not there (ValueError at run time)")
    from .exceptions import python_error

    raise python_error(ValueError, message, reason=f"{what}(): {message} (ValueError at run time)")


def sequences_equal(tx, a: Value, b: Value) -> bool | None:
    """``a == b`` for two lists or two tuples of values, as CPython compares them (None for other pairs).

    A list of another length is unequal at once; tuples compare item by item until one differs.  Each
    item pair is the same object or ``==`` (a tensor pair that is not the same tensor breaks: its
    truth is known only at run time).
    """
    from .containers import ListValue, TupleValue

    kinds = {type(a), type(b)}
    if kinds not in ({ListValue}, {TupleValue}):
        return None
    if type(a) is ListValue and a.length() != b.length():
        return False
    left, right = a.items, b.items
    for x, y in zip(left, right):
        if not same_or_equal(tx, x, y):
            return False
    return len(left) == len(right)


def dict_union(tx, symbol: str, a: Value, b: Value) -> Value:
    """``a | b`` / ``a |= b`` with ``a`` a dict value: ``dict.__or__``/``__ior__`` and the subclasses' own.

    ``|`` needs two dicts (a subclass on the right answers first, ``OrderedDict.__ror__``); ``|=`` takes
    any mapping or iterable of pairs, as ``update`` does, and is ``a`` itself.
    """
    from .builtins.constructors import dict_items
    from .containers import DictValue
    from .exceptions import python_error

    if symbol == "|=":
        a.mutate(tx)
        a.items.update(dict_items(tx, [b], {}))
        return a
    if not isinstance(b, DictValue):
        raise python_error(TypeError, f"unsupported operand type(s) for |: '{a.python_type().__name__}' and "
                           f"'{b.python_type().__name__}'")
    # The real operator on real dicts of the values: the result's type and order are CPython's.
    left, right = a.real_items(), b.real_items()
    result = left | right
    factory = a.default_factory if type(result) is a.dict_type else b.default_factory
    return DictValue(dict(result), dict_type=type(result), default_factory=factory)


def one_value_per_object(value: Value) -> bool:
    """Whether ``value`` is the one value standing for its runtime object, so that two such values are two
    objects (``is`` is False): a list, dict, deque or set.  ``wrap`` keeps one value per container of the
    frame (``tx.ctx.containers``) and one made in the trace is a new object.  (Tuples are not: two
    values may be one tuple read through two paths.)"""
    from .containers import DictValue, ListValue
    from .deques import DequeValue
    from .sets import SetValue

    return type(value) in (ListValue, DictValue, DequeValue, SetValue)


def known_distinct(a: Value, b: Value) -> bool:
    """Whether two different values are known to be two runtime objects (``a is b`` is False): two containers
    of ``one_value_per_object``, or an instance ``__dict__`` and a container that cannot be it (the
    ``__dict__`` of an object made in the trace is new; a dict made in the trace is not a frame object's)."""
    from .instance_dicts import InstanceDictValue, NewInstanceDictValue

    if a is b:
        return False
    if one_value_per_object(a) and one_value_per_object(b):
        return True
    for x, y in ((a, b), (b, a)):
        if isinstance(x, NewInstanceDictValue) and (one_value_per_object(y) or isinstance(y, InstanceDictValue)):
            return True
        if isinstance(x, InstanceDictValue) and one_value_per_object(y) and y.source is None:
            return True
    return False


class ContainerMethodValue(MethodOfValue):
    """Methods of symbolic tuples, lists and dicts."""

    def call(self, tx, args, kwargs):
        from .containers import DictValue, ListValue, TupleValue

        c, name = self.owner, self.name
        if kwargs and name not in ("update", "sort"):
            raise GraphBreak(f"{self.describe()} with keyword arguments")
        if isinstance(c, ListValue):
            if name == "sort":
                from .builtins.ordering import sort_list

                return sort_list(tx, c, args, kwargs)
            if name == "append":
                c.mutate(tx, "list.append")
                c.items.append(args[0])
                return ConstantValue(None)
            if name == "extend":
                c.mutate(tx, "list.extend")
                c.items.extend(args[0].iterate(tx))
                return ConstantValue(None)
            if name == "insert":
                c.mutate(tx, "list.insert")
                c.items.insert(args[0].as_constant(), args[1])
                return ConstantValue(None)
            if name == "pop":
                index = args[0].as_constant() if args else -1
                if not -len(c.items) <= index < len(c.items):
                    from .exceptions import python_error

                    raise python_error(IndexError, "pop index out of range" if c.items else "pop from empty list",
                                       reason="list.pop from an empty list or out of range (IndexError at run time)")
                c.mutate(tx, "list.pop")
                return c.items.pop(index)
            if name == "reverse":
                c.mutate(tx, "list.reverse")
                c.items.reverse()
                return ConstantValue(None)
            if name == "clear":
                c.mutate(tx, "list.clear")
                c.items.clear()
                return ConstantValue(None)
            if name == "copy":
                return ListValue(list(c.items))
        if isinstance(c, (ListValue, TupleValue)) and name in ("index", "count"):
            if not c.is_constant() or not args[0].is_constant():
                raise GraphBreak(f"{self.describe()} on non-constant items")
            try:
                return ConstantValue(getattr(c.as_constant(), name)(*(a.as_constant() for a in args)))
            except ValueError as e:
                from .exceptions import from_real

                raise from_real(e, f"{self.describe()}: {e} (ValueError at run time)") from None
        if isinstance(c, DictValue):
            if name in ("update", "pop", "setdefault"):
                c.mutate(tx)
            if name in ("keys", "values", "items") and not args and not kwargs:
                from .containers import DictViewValue

                return DictViewValue(c, name)
            if name == "get":
                from .containers import dict_key

                c.refuse_tensor_key(args[0])
                default = args[1] if len(args) > 1 else ConstantValue(None)
                return c.items.get(dict_key(tx, args[0]), default)
            if name == "copy":
                from .protocols import copied

                copy = c.like({})
                copy.items = copied(dict.copy, c.items)  # ``PyDict_Copy``: eager's table (and probe order)
                return copy
            if name == "update":
                for a in args:
                    if not isinstance(a, DictValue):
                        raise GraphBreak("dict.update with a non-dict argument")
                    c.items.update(a.items)
                for k, v in kwargs.items():
                    c.items[k] = v
                return ConstantValue(None)
            if name in ("pop", "setdefault"):
                from .containers import ABSENT, dict_key, missing_key

                c.refuse_tensor_key(args[0])
                key = dict_key(tx, args[0])
                if name == "pop":
                    found = c.items.pop(key, ABSENT)  # one lookup, as eager's
                    if found is not ABSENT:
                        return found
                    if len(args) > 1:
                        return args[1]
                    raise missing_key(key, c.describe())
                return c.items.setdefault(key, args[1] if len(args) > 1 else ConstantValue(None))
        raise GraphBreak(f"{self.describe()} is not supported")
