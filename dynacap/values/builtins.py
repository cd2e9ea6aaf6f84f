"""Python builtins (``len``, ``isinstance``, ``range``, ``min``...) over symbolic values.

Each supported builtin has a handler here; a builtin with only constant
arguments is simply called.  Builtins that consume an iterable pull a
generator's items one at a time and stop where eager stops (``any``,
``zip``, ``next``...); over generators, ``zip``/``enumerate``/``map``/
``filter`` are themselves lazy (``values.iterators``).  ``print``,
``input``, ``open`` and other builtins with effects are graph breaks.
"""
from __future__ import annotations

import builtins
import collections
import inspect
import operator
import types

from ..errors import GraphBreak
from .base import Value, constant_args
from .constant import ConstantValue
from .containers import DictValue, IteratorValue, ListValue, SequenceValue, TupleValue
from .functions import make_partial
from .namespaces import frame_globals, frame_locals
from .protocols import IdValue, absolute, constant_protocol, ordering_key
from .iterators import (EnumerateValue, FilterValue, GeneratorValue, MapValue, PullIterator, call_back,
                        callable_iterator, is_lazy, iterator_of, zip_of)

_EFFECTFUL = {"print", "input", "open", "exec", "eval", "compile", "breakpoint", "exit", "quit", "delattr", "globals", "locals", "vars", "id", "iter", "next", "super", "__import__", "help"}

#: ``inspect`` predicates that depend only on an object's type: answered from ``python_type()``.
TYPE_PREDICATES = {
    inspect.isfunction: types.FunctionType,
    inspect.isclass: type,
    inspect.ismethod: types.MethodType,
    inspect.ismodule: types.ModuleType,
    inspect.isbuiltin: types.BuiltinFunctionType,
}


class TypePredicateValue(Value):
    """``inspect.isfunction`` and friends, over symbolic values."""

    def __init__(self, fn, source=None):
        self.fn = fn
        self.source = source

    def describe(self):
        return f"`inspect.{self.fn.__name__}`"

    def real_object(self):
        return self.fn

    def call(self, tx, args, kwargs):
        if len(args) != 1 or kwargs:
            raise GraphBreak(f"{self.describe()} takes one argument (TypeError at run time)")
        return ConstantValue(issubclass(args[0].python_type(), TYPE_PREDICATES[self.fn]))


class SignatureValue(Value):
    """``inspect.signature(f)`` of a Python function or a method of one: a constant of the guarded function."""

    def __init__(self, fn=inspect.signature, source=None):
        self.fn = fn
        self.source = source

    def describe(self):
        return "`inspect.signature`"

    def real_object(self):
        return self.fn

    def call(self, tx, args, kwargs):
        from .functions import BoundMethodValue, UserFunctionValue

        if len(args) != 1 or kwargs:
            raise GraphBreak(f"{self.describe()} with these arguments")
        target = args[0]
        function = target.function if isinstance(target, BoundMethodValue) else target
        if not isinstance(function, UserFunctionValue) or not _plain_wrapped_chain(function.fn):
            raise GraphBreak(f"{self.describe()} of {target.describe()}")
        fn = function.real_object() if function.source is not None else function.fn
        signature = inspect.signature(fn)
        if isinstance(target, BoundMethodValue):
            parameters = list(signature.parameters.values())
            if not parameters or parameters[0].kind not in (inspect.Parameter.POSITIONAL_ONLY,
                                                             inspect.Parameter.POSITIONAL_OR_KEYWORD):
                raise GraphBreak(f"{self.describe()} of {target.describe()}, which binds no first argument")
            signature = signature.replace(parameters=parameters[1:])
        return ConstantValue(signature)


def _plain_wrapped_chain(fn) -> bool:
    """Whether ``inspect.signature`` reads only plain functions' own attributes (``__wrapped__`` chain)."""
    for _ in range(100):
        if type(fn) is not types.FunctionType or "__signature__" in fn.__dict__:
            return False
        if "__wrapped__" not in fn.__dict__:
            return True
        fn = fn.__dict__["__wrapped__"]
    return False


class BuiltinValue(Value):
    def __init__(self, fn, source=None):
        self.fn = fn
        self.source = source

    def describe(self):
        return f"builtin `{self.fn.__name__}`"

    def real_object(self):
        return self.fn

    def python_type(self):
        return type(self.fn)

    def getattr(self, tx, name):
        if name in ("__name__", "__qualname__", "__module__", "__doc__"):
            return ConstantValue(getattr(self.fn, name))
        if isinstance(self.fn, type) and name in ("__mro__", "__bases__", "__base__"):
            return ConstantValue(getattr(self.fn, name))  # a built-in class's MRO never changes
        if self.fn is object and name == "__getattribute__":
            from .objects import GenericGetattrValue

            return GenericGetattrValue()
        if self.fn is object and name == "__new__":
            from . import instances

            if hasattr(instances, "ObjectNewValue"):
                return instances.ObjectNewValue()  # ``object.__new__(cls)``: a new object of the trace
        if self.fn is tuple and name == "__new__":
            from .subclasses import TupleNewValue

            return TupleNewValue()
        if self.fn is object and name == "__setattr__":
            from .objects import GenericSetattrValue

            return GenericSetattrValue()
        if name == "fromkeys" and self.fn in (dict, collections.OrderedDict):
            return _FromKeys(self.fn)
        return super().getattr(tx, name)

    def is_constant(self) -> bool:
        # A builtin class is an immutable constant (a subscript of ``List[int]``, ``Dict[str, int]``).
        return isinstance(self.fn, type)

    def as_constant(self):
        if isinstance(self.fn, type):
            return self.fn
        return super().as_constant()

    def getitem(self, tx, index):
        """``list[int]``, ``dict[str, Tensor]``: a type annotation (``types.GenericAlias``), a constant."""
        if isinstance(self.fn, type) and index.is_constant():
            return ConstantValue(self.fn[index.as_constant()])
        return super().getitem(tx, index)

    def call(self, tx, args, kwargs):
        name = self.fn.__name__
        handler = _HANDLERS.get(name)
        if handler is not None:
            result = handler(tx, args, kwargs)
            if result is not None:
                return result
        if name in _EFFECTFUL:
            hint = " (move it out of the captured code, or behind a flag, to keep one graph)" \
                if name == "print" else ""
            raise GraphBreak(f"`{name}()` has effects outside the graph; it runs eagerly{hint}")
        const = constant_args(args, kwargs)
        if const is not None:
            from .wrap import wrap_constant_result

            try:
                return wrap_constant_result(self.fn(*const[0], **const[1]), f"{name}()")
            except Exception as e:
                from .exceptions import from_real

                raise from_real(e, f"`{name}()` raised {type(e).__name__}: {e}") from None
        raise GraphBreak(f"`{name}()` on {', '.join(a.describe() for a in args)} is not supported")


class _FromKeys(Value):
    """``dict.fromkeys(keys, value=None)`` / ``OrderedDict.fromkeys``: every key holding the one ``value``."""

    def __init__(self, dict_type: type):
        self.dict_type = dict_type

    def describe(self):
        return f"{self.dict_type.__name__}.fromkeys"

    def call(self, tx, args, kwargs):
        from .objects import all_items

        if kwargs or len(args) not in (1, 2):
            raise GraphBreak(f"{self.describe()} takes one or two positional arguments")
        value = args[1] if len(args) > 1 else ConstantValue(None)
        keys = all_items(tx, args[0])
        if not all(k.is_constant() for k in keys):
            raise GraphBreak(f"{self.describe()} with keys not known at capture time")
        return DictValue({k.as_constant(): value for k in keys}, dict_type=self.dict_type)


def _vars(tx, args, kwargs):
    """``vars(obj)``: ``obj.__dict__`` read as the attribute; ``vars()``: the frame's ``locals()``."""
    from .objects import ObjectValue

    if not args and not kwargs:
        return frame_locals(tx)
    if len(args) == 1 and not kwargs and isinstance(args[0], ObjectValue):
        return args[0].getattr(tx, "__dict__")
    return None


def _globals(tx, args, kwargs):
    return frame_globals(tx) if not args and not kwargs else None


def _locals(tx, args, kwargs):
    return frame_locals(tx) if not args and not kwargs else None


def _dir(tx, args, kwargs):
    """``dir()``: the sorted names of the frame's ``locals()`` (called for real, it would list dynacap's own)."""
    if args or kwargs:
        return None
    return ListValue([ConstantValue(name) for name in sorted(frame_locals(tx).items)])


def _hash(tx, args, kwargs):
    """``hash()`` of a constant (computed now, as the run's own hash is), of a user object by its class's
    ``__hash__`` (traced; ``None`` makes it unhashable); of anything else, a break."""
    if len(args) == 1 and not kwargs and args[0].is_constant():
        return None  # called on the constant below
    if len(args) == 1 and not kwargs:
        found = constant_protocol(tx, hash, "`hash()`", args[0])
        if found is not None:
            return found
    raise GraphBreak(f"`hash()` of {args[0].describe() if args else 'nothing'} is not known at capture time")


def _iter(tx, args, kwargs):
    if len(args) == 2 and not kwargs:
        return callable_iterator(tx, args[0], args[1])
    if len(args) != 1 or kwargs:
        return None
    return iterator_of(tx, args[0])


def _next(tx, args, kwargs):
    if not args or not isinstance(args[0], (IteratorValue, PullIterator)) or kwargs:
        return None
    # What a generator raises leaves next() as it is (StopIteration as RuntimeError, PEP 479).
    generator = args[0] if isinstance(args[0], GeneratorValue) else None
    finished = generator is not None and generator.done
    item = generator.next_item(tx, exact=True) if generator is not None else args[0].next_item(tx)
    if item is not None:
        return item
    if len(args) > 1:
        return args[1]
    if generator is not None:
        from .iterators import stop_iteration

        # The StopIteration of a generator that returns carries its value (later ones carry none).
        raise stop_iteration(ConstantValue(None) if finished else generator.return_value)
    from .exceptions import python_error

    raise python_error(StopIteration, reason="next() on an exhausted iterator (StopIteration at run time)")


def _len(tx, args, kwargs):
    (x,) = args
    if isinstance(x, SequenceValue):
        return ConstantValue(x.length())
    if isinstance(x, DictValue):
        return ConstantValue(len(x.items))
    from .instance_dicts import NewInstanceDictValue
    from .numpy_ns import NDArrayValue
    from .sets import SetValue
    from .tensor import TensorValue

    if isinstance(x, NDArrayValue):
        return x.length(tx)  # its first size (symbolic where it is); a break for a NumPy scalar
    if isinstance(x, (SetValue, NewInstanceDictValue)):
        return ConstantValue(x.length())
    if isinstance(x, TensorValue):
        if x.fake.dim() == 0:
            raise GraphBreak("len() of a 0-d tensor")
        return x.size_item(tx, 0)
    from .module import ModuleValue

    if isinstance(x, ModuleValue):
        return x.length(tx)
    from .objects import ObjectValue

    if isinstance(x, ObjectValue):
        n = x.call_special(tx, "__len__", [], "`len()`")
        if not (n.is_constant() and type(n.as_constant()) is int and n.as_constant() >= 0):
            raise GraphBreak(f"`len()` of {x.describe()}: its __len__ returned {n.describe()}")
        return n
    return None


def _classinfo(value):
    """The class or (nested) tuple of classes of ``isinstance``'s second argument."""
    if isinstance(value, SequenceValue):
        return tuple(_classinfo(v) for v in value.items)
    if value.is_constant():
        return value.as_constant()
    return value.real_object()  # builtin types (list, dict...) and torch classes


def _isinstance(tx, args, kwargs):
    obj, classes = args
    cls = _classinfo(classes)
    answer = issubclass(obj.python_type(), cls)
    from .objects import ObjectValue, has_lookup_hooks

    if isinstance(obj, ObjectValue) and has_lookup_hooks(obj.python_type()) and (not answer or any(
            type(c) is not type for c in (cls if type(cls) is tuple else (cls,)))):
        # CPython reads ``obj.__class__`` here (an ABC always does): through the class's own hooks.
        claimed = obj.getattr(tx, "__class__")
        if not (claimed.is_constant() and isinstance(claimed.as_constant(), type)):
            raise GraphBreak(f"isinstance() of {obj.describe()}, whose __class__ is {claimed.describe()}")
        answer = answer or issubclass(claimed.as_constant(), cls)
    return ConstantValue(answer)


def _abs(tx, args, kwargs):
    from .numpy_ns import NDArrayValue, numpy_operator
    from .tensor import TensorValue

    if len(args) == 1 and not kwargs and isinstance(args[0], NDArrayValue):
        return numpy_operator(tx, operator.abs, [args[0]], "`abs()`")
    if len(args) == 1 and not kwargs and isinstance(args[0], TensorValue):
        return tx.graph.call("call_function", operator.abs, [args[0]], {}, "abs()")
    if len(args) == 1 and not kwargs:
        return absolute(tx, args[0])
    return None


def _id(tx, args, kwargs):
    if len(args) != 1 or kwargs:
        return None
    return IdValue(args[0], tx.ctx.instructions_run)


def _repr(tx, args, kwargs):
    from .exceptions import ExceptionValue

    if len(args) == 1 and not kwargs and isinstance(args[0], ExceptionValue):
        return args[0].to_text(tx, "repr")
    return constant_protocol(tx, repr, "`repr()`", args[0]) if len(args) == 1 and not kwargs else None


def _format(tx, args, kwargs):
    if kwargs or len(args) not in (1, 2):
        return None
    return constant_protocol(tx, format, "`format()`", *args)


def _type(tx, args, kwargs):
    if len(args) == 1 and not kwargs:
        from .wrap import wrap

        return wrap(tx, args[0].python_type(), None)
    if len(args) == 3:
        from .classes import type_call

        return type_call(tx, args, kwargs)  # a class made in the trace, as a ``class`` statement makes one
    return None


def _sequence_ctor(container):
    def handler(tx, args, kwargs):
        if kwargs:
            return None
        from .objects import all_items

        items = all_items(tx, args[0]) if args else []
        return TupleValue(items) if container is tuple else ListValue(items)

    return handler


def _pulled(tx, value: Value) -> Value:
    """An object with its own ``__iter__`` as the iterator it makes (pulled item by item), else ``value``."""
    from .objects import ObjectValue

    return iterator_of(tx, value) if isinstance(value, ObjectValue) else value


def _enumerate(tx, args, kwargs):
    if args:
        args = [_pulled(tx, args[0]), *args[1:]]
    start = kwargs.get("start", args[1] if len(args) > 1 else ConstantValue(0)).as_constant()
    if is_lazy(args[0]) or isinstance(args[0], IteratorValue) or type(args[0]) in (ListValue, DictValue):
        # Pulled one item at a time, as eager's enumerate: a list or dict is read live at each step (a loop
        # changing it sees the change), an iterator keeps what enumerate did not take.  Other rows (a
        # ModuleList's layers, a tuple) are read at once, so a break inside the loop resumes each iteration.
        return EnumerateValue(iterator_of(tx, args[0]), start)
    rows = [TupleValue([ConstantValue(start + i), v]) for i, v in enumerate(args[0].iterate(tx))]
    return _rows_iterator(rows, args[:1])


def _rows_iterator(rows: list, iterables: list) -> Value:
    """What ``zip``/``enumerate`` over items known now return: an iterator (``next()`` works on it, and it
    is rebuilt as one after a break) when no iterable can change before the rows are read (tuples, strings,
    ranges); else the rows, which only a ``for`` loop or a consumer reads at once (``next()`` on them breaks:
    eager's iterator would see a list changed in between)."""
    return IteratorValue(rows) if all(_fixed(v) for v in iterables) else RowsValue(rows)


def _fixed(v) -> bool:
    """Whether ``v``'s items cannot change before a zip/enumerate/reversed over it reads them."""
    from .containers import DictViewValue

    if isinstance(v, TupleValue) and not isinstance(v, DictViewValue):
        return True
    return v.is_constant() and type(v.as_constant()) in (str, bytes, tuple, range, frozenset)


class RowsValue(TupleValue):
    """The rows of a ``zip``/``enumerate``/``reversed`` over a list, read at once by a ``for`` loop or a
    consumer.  The iterator eager has would see the list change in between, so one kept across a graph
    break, returned or stored is never rebuilt (the frame runs eagerly)."""

    def reconstruct(self, cg):
        raise GraphBreak("a zip, enumerate or reversed object over a list is used after the graph (the function "
                         "runs eagerly)")


def _zip(tx, args, kwargs):
    strict = kwargs.get("strict", ConstantValue(False))
    if set(kwargs) - {"strict"} or not strict.is_constant():
        return None
    args = [_pulled(tx, a) for a in args]
    if strict.as_constant() or not all(_fixed(a) for a in args):
        # Pulled one item of each in turn, as eager's zip: an iterator keeps what zip did not take, a list
        # is read as it is at each step, strict=True raises ValueError where eager does.
        return zip_of(tx, args, bool(strict.as_constant()))
    return IteratorValue([TupleValue(list(row)) for row in zip(*(a.iterate(tx) for a in args))])


def _map(tx, args, kwargs):
    if len(args) < 2 or kwargs:
        return None
    return MapValue(args[0], [iterator_of(tx, a) for a in args[1:]])


def _filter(tx, args, kwargs):
    if len(args) != 2 or kwargs:
        return None
    fn = None if isinstance(args[0], ConstantValue) and args[0].value is None else args[0]
    return FilterValue(fn, iterator_of(tx, args[1]))


def _reversed(tx, args, kwargs):
    if isinstance(args[0], (IteratorValue, PullIterator)):
        raise GraphBreak(f"reversed() of {args[0].describe()} (TypeError at run time)")
    if type(args[0]) is ListValue:
        from .live_iterators import live_reversed

        return live_reversed(args[0])  # an index into the live list, as CPython's
    return _rows_iterator(list(reversed(args[0].iterate(tx))), args[:1])


def dict_items(tx, args, kwargs) -> dict:
    """The items ``dict(*args, **kwargs)`` holds, by constant key, as CPython's ``dict_update_arg`` reads its
    argument: a dict's items; else, when it has a ``keys`` attribute, ``arg[k]`` for each ``k`` of
    ``arg.keys()`` (a mapping); else its items as pairs."""
    from .objects import all_items

    items = {}
    if args:
        source = args[0]
        if isinstance(source, DictValue):
            items.update(source.items)
        elif _has_keys(tx, source):
            for key in all_items(tx, source.getattr(tx, "keys").call(tx, [], {})):
                items[key.as_constant()] = source.getitem(tx, key)
        else:
            for i, pair in enumerate(all_items(tx, source)):
                parts = all_items(tx, pair)
                if len(parts) != 2:
                    from .exceptions import python_error

                    raise python_error(ValueError, f"dictionary update sequence element #{i} has length "
                                       f"{len(parts)}; 2 is required")
                items[parts[0].as_constant()] = parts[1]
    items.update(kwargs)
    return items


def _has_keys(tx, value: Value) -> bool:
    """Whether ``dict(value)`` reads ``value`` as a mapping (it has a ``keys`` attribute, looked up as eager
    does); a ``dict`` subclass whose own ``__getitem__``/``keys`` CPython's fast path would skip is a break."""
    from .attributes import has_attribute
    from .objects import ObjectValue, class_lookup

    if isinstance(value, (IteratorValue, PullIterator)):
        return False
    if isinstance(value, ObjectValue):
        cls = type(value.obj)
        if issubclass(cls, dict) and class_lookup(cls, "__iter__") is dict.__iter__ and (
                class_lookup(cls, "__getitem__") is not dict.__getitem__ or class_lookup(cls, "keys") is not dict.keys):
            raise GraphBreak(f"dict() of {value.describe()}: CPython reads its items past its own methods")
        answer = has_attribute(tx, value, "keys")
    else:
        try:
            answer = hasattr(value.python_type(), "keys")
        except GraphBreak:
            answer = None
    if answer is None:
        raise GraphBreak(f"dict() of {value.describe()}: whether it is a mapping is not known at capture time")
    return answer


def _dict(tx, args, kwargs):
    return DictValue(dict_items(tx, args, kwargs))


def _ordered_dict(tx, args, kwargs):
    made = _dict(tx, args, kwargs)
    return DictValue(made.items, dict_type=collections.OrderedDict)


def _defaultdict(tx, args, kwargs):
    """``defaultdict(factory, ...)``: a dict whose missing keys call ``factory`` (a value, or None)."""
    factory = args[0] if args else ConstantValue(None)
    if factory.is_constant() and not (factory.as_constant() is None or callable(factory.as_constant())):
        raise GraphBreak("defaultdict: the first argument must be callable or None (TypeError at run time)")
    made = _dict(tx, args[1:], kwargs)
    return DictValue(made.items, dict_type=collections.defaultdict, default_factory=factory)


def _constant_items(tx, iterable: Value) -> list | None:
    """The items of ``iterable`` as Python constants, or None (a known iterator is then left as it was)."""
    if isinstance(iterable, IteratorValue):
        values = iterable.items[iterable.position:]
    else:
        values = iterable.iterate(tx)
    if not all(v.is_constant() for v in values):
        return None
    if isinstance(iterable, IteratorValue):
        iterable.position = len(iterable.items)
    return [v.as_constant() for v in values]


def _minmax(fn):
    def handler(tx, args, kwargs):
        if set(kwargs) - {"key", "default"} or not args or "default" in kwargs and len(args) > 1:
            return None
        key = kwargs["key"] if _has_key(kwargs) else None
        if key is None and "default" not in kwargs:
            if len(args) == 1:
                values = _constant_items(tx, args[0])
            else:
                values = [v.as_constant() for v in args] if all(v.is_constant() for v in args) else None
            if values is not None:
                return ConstantValue(_at_capture(fn, values))
        from .objects import all_items

        items = all_items(tx, args[0]) if len(args) == 1 else list(args)
        if not items:
            if "default" in kwargs:
                return kwargs["default"]
            raise GraphBreak(f"`{fn.__name__}()` of an empty sequence (ValueError at run time)")
        rank = _rank(tx, items, key)
        return items[_at_capture(fn, range(len(items)), key=rank)]

    return handler


def _rank(tx, items: list[Value], key: Value | None):
    """What the real ``sorted``/``min``/``max`` compare for item ``i``: ``key(item)`` traced when CPython
    asks for it (sort: every key first; min/max: each before its comparison), as ``ordering_key`` gives it."""
    def rank(i):
        value = items[i] if key is None else call_back(tx, key, [items[i]])
        return ordering_key(tx, value)

    return rank


def _has_key(kwargs) -> bool:
    key = kwargs.get("key")
    return key is not None and not (key.is_constant() and key.as_constant() is None)


def _sort_order(tx, items: list[Value], kwargs) -> tuple[list[int], Exception | None]:
    """The order ``list.sort`` leaves ``items`` in (indices), run for real over traced comparisons, and what
    it raised: a comparison that raises leaves a partly sorted list, as in eager."""
    from .exceptions import PythonError, from_real

    reverse = kwargs["reverse"].as_constant() if "reverse" in kwargs else False
    order = list(range(len(items)))
    try:
        order.sort(key=_rank(tx, items, kwargs["key"] if _has_key(kwargs) else None), reverse=reverse)
    except PythonError as e:
        return order, e
    except GraphBreak:
        raise
    except Exception as e:
        return order, from_real(e, f"sorting raised {type(e).__name__}: {e}")
    return order, None


def _sorted(tx, args, kwargs):
    if len(args) != 1 or set(kwargs) - {"reverse", "key"} or not kwargs.get("reverse", ConstantValue(0)).is_constant():
        return None
    if not _has_key(kwargs):
        values = _constant_items(tx, args[0])
        if values is not None:
            reverse = kwargs["reverse"].as_constant() if "reverse" in kwargs else False
            return ListValue([ConstantValue(v) for v in _at_capture(sorted, values, reverse=reverse)])
    from .objects import all_items

    items = all_items(tx, args[0])
    order, error = _sort_order(tx, items, kwargs)
    if error is not None:
        raise error
    return ListValue([items[i] for i in order])


def sort_list(tx, target: ListValue, args, kwargs) -> Value:
    """``lst.sort(key=..., reverse=...)``: the order the real sort leaves, written into the list (one
    mutation), also when a comparison raises (the list is then partly sorted, as in eager)."""
    if args or set(kwargs) - {"key", "reverse"}:
        raise GraphBreak("list.sort() takes only the keyword arguments key and reverse (TypeError at run time)")
    if not kwargs.get("reverse", ConstantValue(0)).is_constant():
        raise GraphBreak(f"list.sort() of {target.describe()} with `reverse` not known at capture time")
    items = list(target.items)
    order, error = _sort_order(tx, items, kwargs)
    target.mutate(tx, "list.sort")
    target.items = [items[i] for i in order]
    if error is not None:
        raise error
    return ConstantValue(None)


def _at_capture(fn, *args, **kwargs):
    """``fn`` run now (on constants, or on stand-ins whose comparisons are traced); what it raises is raised
    at run time (a break, or a catchable error)."""
    try:
        return fn(*args, **kwargs)
    except GraphBreak:
        raise
    except Exception as e:
        from .exceptions import from_real

        raise from_real(e, f"`{fn.__name__}()` raised {type(e).__name__}: {e}") from None


def _sum(tx, args, kwargs):
    from .operators import binary_op

    if kwargs:
        return None
    total = args[1] if len(args) > 1 else ConstantValue(0)
    if is_lazy(args[0]):
        # Each item is added before the next is made, as eager does.
        while (item := args[0].next_item(tx)) is not None:
            total = binary_op(tx, "+", total, item)
        return total
    items = args[0].iterate(tx)
    if all(i.is_constant() for i in items) and total.is_constant():
        return ConstantValue(sum((i.as_constant() for i in items), total.as_constant()))
    for item in items:
        total = binary_op(tx, "+", total, item)
    return total


def _anyall(stop_at: bool):
    def handler(tx, args, kwargs):
        if len(args) != 1 or kwargs:
            return None
        iterator = iterator_of(tx, args[0])
        # Short-circuits like eager: items after the deciding one are never asked for.
        while (item := iterator.next_item(tx)) is not None:
            if item.truth(tx) is stop_at:
                return ConstantValue(stop_at)
        return ConstantValue(not stop_at)

    return handler


def _setattr(tx, args, kwargs):
    """``setattr(obj, "name", v)``: the same store as ``obj.name = v``."""
    if len(args) != 3 or kwargs or not (args[1].is_constant() and isinstance(args[1].as_constant(), str)):
        return None
    args[0].setattr(tx, args[1].as_constant(), args[2])
    return ConstantValue(None)


def _getattr(tx, args, kwargs):
    from .objects import AttributeMissing

    obj, name = args[0], args[1].as_constant()
    try:
        return obj.getattr(tx, name)
    except AttributeMissing as e:
        if len(args) > 2 and not e.frames:
            return args[2]
        raise
    except GraphBreak:
        if len(args) > 2:
            from .attributes import has_attribute

            if has_attribute(tx, obj, name) is False:
                return args[2]
        raise


def _delattr(tx, args, kwargs):
    """``delattr(obj, "name")`` on an object made in the trace: the same deletion as ``del obj.name``."""
    from .instances import NewObjectValue

    if len(args) != 2 or kwargs or not isinstance(args[0], NewObjectValue) \
            or not (args[1].is_constant() and type(args[1].as_constant()) is str):
        return None
    args[0].delete_attribute(tx, args[1].as_constant())
    return ConstantValue(None)


def _hasattr(tx, args, kwargs):
    from .attributes import has_attribute

    answer = has_attribute(tx, args[0], args[1].as_constant())
    return None if answer is None else ConstantValue(answer)


def _bool(tx, args, kwargs):
    return ConstantValue(args[0].truth(tx)) if args else ConstantValue(False)


def _callable(tx, args, kwargs):
    from .functions import BoundMethodValue, OpaqueCallableValue, UserFunctionValue
    from .module import ModuleValue
    from .torch_ns import TorchValue

    x = args[0]
    if isinstance(x, (UserFunctionValue, BoundMethodValue, OpaqueCallableValue, BuiltinValue, ModuleValue)):
        return ConstantValue(True)
    if isinstance(x, TorchValue):
        return ConstantValue(callable(x.obj))
    if x.is_constant():
        return ConstantValue(callable(x.as_constant()))
    from .objects import _MISSING, ObjectValue, class_lookup, guard_class_attribute

    if isinstance(x, ObjectValue):
        # CPython: the type has a ``tp_call`` slot, which a class gets from a ``__call__`` along its MRO.
        method = class_lookup(type(x.obj), "__call__")
        if method is not _MISSING:
            guard_class_attribute(tx, x, x.obj, "__call__", method)
        return ConstantValue(method is not _MISSING)
    return None


def _scalar_ctor(kind):
    def handler(tx, args, kwargs):
        from .tensor import TensorValue

        if args and isinstance(args[0], TensorValue) and kind is not str:
            if len(args) == 1 and not kwargs:
                return args[0].python_number(tx, kind)  # a break unless config.capture_scalar_outputs
            raise GraphBreak(f"`{kind.__name__}()` of a tensor reads its value into Python")
        from .exceptions import ExceptionValue

        if kind is str and len(args) == 1 and not kwargs and isinstance(args[0], ExceptionValue):
            return args[0].to_text(tx, "str")
        if len(args) == 1 and not kwargs:
            return constant_protocol(tx, kind, f"`{kind.__name__}()`", args[0])  # __float__, __int__, __str__...
        return None

    return handler


def _super(tx, args, kwargs):
    from .superproxy import make_super

    return make_super(tx, args)


def _set_ctor(frozen: bool):
    def handler(tx, args, kwargs):
        from .sets import build_set

        if kwargs or len(args) > 1:
            return None
        return build_set(tx, args[0] if args else None, frozen)

    return handler


_HANDLERS = {
    "super": _super,
    "vars": _vars,
    "globals": _globals,
    "locals": _locals,
    "dir": _dir,
    "hash": _hash,
    "iter": _iter,
    "next": _next,
    "len": _len,
    "isinstance": _isinstance,
    "abs": _abs,
    "repr": _repr,
    "id": _id,
    "format": _format,
    "type": _type,
    "tuple": _sequence_ctor(tuple),
    "list": _sequence_ctor(list),
    "set": _set_ctor(False),
    "frozenset": _set_ctor(True),
    "enumerate": _enumerate,
    "zip": _zip,
    "map": _map,
    "filter": _filter,
    "sorted": _sorted,
    "reversed": _reversed,
    "dict": _dict,
    "OrderedDict": _ordered_dict,
    "partial": make_partial,
    "defaultdict": _defaultdict,
    "min": _minmax(min),
    "max": _minmax(max),
    "sum": _sum,
    "any": _anyall(True),
    "all": _anyall(False),
    "getattr": _getattr,
    "setattr": _setattr,
    "hasattr": _hasattr,
    "delattr": _delattr,
    "bool": _bool,
    "callable": _callable,
    "int": _scalar_ctor(int),
    "float": _scalar_ctor(float),
    "str": _scalar_ctor(str),
}

BUILTIN_FUNCTIONS = {id(v) for v in vars(builtins).values() if callable(v)}
