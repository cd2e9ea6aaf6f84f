"""Opcodes that build, index and unpack containers (tuples, lists, dicts, sets, slices, strings)."""
from __future__ import annotations

from ..errors import GraphBreak
from ..values.constant import ConstantValue
from ..values.containers import ABSENT, DictValue, ListValue, SequenceValue, TupleValue, dict_key, missing_key
from ..values.exceptions import ExceptionValue, python_error
from ..values.objects import ObjectValue, all_items
from ..values.protocols import format_value, index_operand
from ..values.sets import SetValue, set_add, set_update
from ..values.symbolic import SymNumberValue, SymSliceValue
from ..values.tensor import TensorValue
from .tracer import handles


@handles("BUILD_TUPLE")
def _build_tuple(tx, ins):
    tx.push(TupleValue(tx.popn(ins.arg)))


@handles("BUILD_LIST")
def _build_list(tx, ins):
    tx.push(ListValue(tx.popn(ins.arg)))


@handles("LIST_TO_TUPLE")
def _list_to_tuple(tx, ins):
    tx.push(TupleValue(tx.pop().items))


@handles("LIST_APPEND")
def _list_append(tx, ins):
    value = tx.pop()
    target = tx.stack[-ins.arg]
    target.mutate(tx, "list append")
    target.items.append(value)


@handles("LIST_EXTEND")
def _list_extend(tx, ins):
    value = tx.pop()
    target = tx.stack[-ins.arg]
    target.mutate(tx, "list extend")
    target.items.extend(all_items(tx, value))


@handles("BUILD_SET")
def _build_set(tx, ins):
    # As CPython: an empty set, then each item added in stack order.
    items = tx.popn(ins.arg)
    result = SetValue(set())
    for item in items:
        set_add(tx, result, item)
    tx.push(result)


@handles("SET_ADD")
def _set_add(tx, ins):
    value = tx.pop()
    set_add(tx, tx.stack[-ins.arg], value)


@handles("SET_UPDATE")
def _set_update(tx, ins):
    iterable = tx.pop()
    set_update(tx, tx.stack[-ins.arg], iterable)


@handles("BUILD_MAP")
def _build_map(tx, ins):
    flat = tx.popn(2 * ins.arg)
    tx.push(DictValue({dict_key(tx, flat[i]): flat[i + 1] for i in range(0, len(flat), 2)}))


@handles("BUILD_CONST_KEY_MAP")
def _build_const_key_map(tx, ins):
    keys = tx.pop().as_constant()
    values = tx.popn(ins.arg)
    tx.push(DictValue(dict(zip(keys, values))))


@handles("DICT_UPDATE", "DICT_MERGE")
def _dict_update(tx, ins):
    value = tx.pop()
    target = tx.stack[-ins.arg]
    if not isinstance(value, DictValue):
        raise GraphBreak(f"`**` unpacking of {value.describe()}")
    if ins.opname == "DICT_MERGE" and set(value.items) & set(target.items):
        raise GraphBreak("duplicate keyword argument (TypeError at run time)")
    _record_frame_dict_change(tx, target)
    target.items.update(value.items)


def _record_frame_dict_change(tx, target) -> None:
    """A dict from the frame (a resumed comprehension's, given as an argument) is written back after the graph.

    A dict the trace made is left alone: these instructions cannot break once they changed it, so the
    instruction's checkpoint stays resumable.
    """
    if target.source is not None:
        target.mutate(tx)


@handles("MAP_ADD")
def _map_add(tx, ins):
    value = tx.pop()
    key = tx.pop()
    target = tx.stack[-ins.arg]
    _record_frame_dict_change(tx, target)
    target.items[dict_key(tx, key)] = value


@handles("BUILD_SLICE")
def _build_slice(tx, ins):
    parts = tx.popn(ins.arg)
    if not all(p.is_constant() for p in parts):
        raise GraphBreak("a slice with non-constant bounds (e.g. from a tensor value)")
    if any(isinstance(p, SymNumberValue) for p in parts):
        tx.push(SymSliceValue(parts))  # ``x[:n]`` with a symbolic n stays symbolic in the graph
        return
    tx.push(ConstantValue(slice(*(p.as_constant() for p in parts))))


@handles("BUILD_STRING")
def _build_string(tx, ins):
    parts = tx.popn(ins.arg)
    tx.push(ConstantValue("".join(p.as_constant() for p in parts)))


@handles("FORMAT_VALUE")
def _format_value(tx, ins):
    spec = tx.pop().as_constant() if (ins.arg & 0x04) else ""
    value = tx.pop()
    if isinstance(value, TensorValue):
        raise GraphBreak("formatting a tensor into a string reads its values")
    conversion = ins.arg & 0x03
    if isinstance(value, ExceptionValue):
        if spec or conversion == 3:
            raise GraphBreak(f"formatting {value.describe()} with a format spec or `!a`")
        tx.push(value.to_text(tx, "repr" if conversion == 2 else "str"))  # through its class's own __str__
        return
    formatted = format_value(tx, value, conversion, spec)
    if formatted is not None:  # a user object: its class's __format__ / __str__ / __repr__, traced
        tx.push(formatted)
        return
    raw = value.as_constant()
    if conversion == 1:
        raw = str(raw)
    elif conversion == 2:
        raw = repr(raw)
    elif conversion == 3:
        raw = ascii(raw)
    tx.push(ConstantValue(format(raw, spec)))


@handles("BINARY_SUBSCR")
def _binary_subscr(tx, ins):
    index = tx.pop()
    container = tx.pop()
    tx.push(container.getitem(tx, index_operand(tx, container, index)))


@handles("STORE_SUBSCR")
def _store_subscr(tx, ins):
    index = tx.pop()
    container = tx.pop()
    value = tx.pop()
    setitem = getattr(container, "setitem", None)
    if setitem is None:
        raise GraphBreak(f"item assignment on {container.describe()}")
    setitem(tx, index_operand(tx, container, index), value)


@handles("DELETE_SUBSCR")
def _delete_subscr(tx, ins):
    index = tx.pop()
    container = tx.pop()
    if isinstance(container, ListValue):
        key = index.as_constant()
        try:
            container.items[key]
        except (IndexError, TypeError) as e:
            raise GraphBreak(f"`del` of item {key!r} of {container.describe()} ({type(e).__name__} at run time)")
        container.mutate(tx, "`del` of an item")
        del container.items[key]
    elif isinstance(container, DictValue):
        container.refuse_tensor_key(index)
        key = dict_key(tx, index)
        container.mutate(tx)
        if container.items.pop(key, ABSENT) is ABSENT:  # one lookup, as eager's ``del``
            raise missing_key(key, container.describe())
    elif hasattr(container, "delitem"):  # a deque
        container.delitem(tx, index)
    elif isinstance(container, ObjectValue):
        container.call_special(tx, "__delitem__", [index], "`del` of an item")
    else:
        raise GraphBreak(f"`del` of an item of {container.describe()}")


@handles("UNPACK_SEQUENCE")
def _unpack_sequence(tx, ins):
    seq = tx.pop()
    items = all_items(tx, seq)
    if len(items) != ins.arg:
        reason = f"unpacking {len(items)} values into {ins.arg} (ValueError at run time)"
        if not (isinstance(seq, SequenceValue) or seq.is_constant()):
            raise GraphBreak(reason)  # an iterator: eager pulls at most one item past ins.arg
        message = f"too many values to unpack (expected {ins.arg})" if len(items) > ins.arg else \
            f"not enough values to unpack (expected {ins.arg}, got {len(items)})"
        raise python_error(ValueError, message, reason=reason)
    for item in reversed(items):
        tx.push(item)


@handles("UNPACK_EX")
def _unpack_ex(tx, ins):
    seq = tx.pop()
    items = all_items(tx, seq)
    before, after = ins.arg & 0xFF, ins.arg >> 8
    if len(items) < before + after:
        reason = "not enough values to unpack (ValueError at run time)"
        if not (isinstance(seq, SequenceValue) or seq.is_constant()):
            raise GraphBreak(reason)
        raise python_error(ValueError, f"not enough values to unpack (expected at least {before + after}, "
                                       f"got {len(items)})", reason=reason)
    middle = ListValue(items[before: len(items) - after])
    for item in reversed(items[len(items) - after:]):
        tx.push(item)
    tx.push(middle)
    for item in reversed(items[:before]):
        tx.push(item)

