"""``min``, ``max``, ``sorted`` and ``list.sort``: the real algorithm run over traced comparisons.

On constants the builtin itself runs at capture time.  Otherwise CPython's own sort (or min/max) runs over
item indices, each comparison traced through ``protocols.ordering_key`` and each ``key`` called when CPython
asks for it, so the order, the calls and a raised comparison error are eager's.
"""
from __future__ import annotations

from ...errors import GraphBreak
from ..base import Value
from ..constant import ConstantValue
from ..containers import IteratorValue, ListValue
from ..iterators import call_back
from ..protocols import ordering_key


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
        from ..objects import all_items

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
    from ..exceptions import PythonError, from_real

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
    from ..objects import all_items

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
        from ..exceptions import from_real

        raise from_real(e, f"`{fn.__name__}()` raised {type(e).__name__}: {e}") from None


HANDLERS = {
    "min": _minmax(min),
    "max": _minmax(max),
    "sorted": _sorted,
}
