"""The builtins that make or consume iterators: ``iter next enumerate zip map filter reversed sum any all``.

Over generators and iterators they pull one item at a time and stop where eager stops (``any`` short-circuits,
``zip`` pulls one item of each argument in turn); ``zip``/``enumerate``/``map``/``filter`` are themselves lazy
there (``values.iterators``).  Over items known at capture time they read the rows at once, and a row set that
could change before eager reads it (a list) is never rebuilt after a graph break.  No builtin with effects
lives here.
"""
from __future__ import annotations

from ...errors import GraphBreak
from ..base import Value
from ..constant import ConstantValue
from ..containers import DictValue, IteratorValue, ListValue, TupleValue
from ..iterators import (EnumerateValue, FilterValue, GeneratorValue, MapValue, PullIterator, callable_iterator,
                         is_lazy, iterator_of, zip_of)


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
        from ..iterators import stop_iteration

        # The StopIteration of a generator that returns carries its value (later ones carry none).
        raise stop_iteration(ConstantValue(None) if finished else generator.return_value)
    from ..exceptions import python_error

    raise python_error(StopIteration, reason="next() on an exhausted iterator (StopIteration at run time)")


def _pulled(tx, value: Value) -> Value:
    """An object with its own ``__iter__`` as the iterator it makes (pulled item by item), else ``value``."""
    from ..objects import ObjectValue

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
    from ..containers import DictViewValue

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
        from ..live_iterators import live_reversed

        return live_reversed(args[0])  # an index into the live list, as CPython's
    return _rows_iterator(list(reversed(args[0].iterate(tx))), args[:1])


def _sum(tx, args, kwargs):
    from ..operators import binary_op

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


HANDLERS = {
    "iter": _iter,
    "next": _next,
    "enumerate": _enumerate,
    "zip": _zip,
    "map": _map,
    "filter": _filter,
    "reversed": _reversed,
    "sum": _sum,
    "any": _anyall(True),
    "all": _anyall(False),
}
