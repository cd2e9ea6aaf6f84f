"""``print`` as a logging call replayed after the graph, when ``config.reorderable_logging_functions``
holds it: each argument's text made at capture time, where eager makes it (``str()`` of a constant,
an exception or a user object, its ``__str__`` traced), and ``print`` called with those texts after
the graph, in program order with the frame's other side effects.  A tensor argument (its text needs
its values), a ``file`` other than the default and anything whose text is not known now are breaks.
Off by default: a break, as in torch.compile.
"""
from __future__ import annotations

import functools

from ... import config
from ...errors import GraphBreak
from ..constant import ConstantValue
from ..protocols import constant_protocol

_PRINT_OPTIONS = ("sep", "end", "file", "flush")


def _print(tx, args, kwargs):
    if print not in config.reorderable_logging_functions:
        return None
    options = {}
    for name, value in kwargs.items():
        if name not in _PRINT_OPTIONS or not value.is_constant():
            raise GraphBreak(f"`print()` with {name}= {value.describe()}, which is not known at capture time")
        options[name] = value.as_constant()
    if options.get("file") is not None:
        raise GraphBreak("`print(file=...)`: only printing to sys.stdout is replayed after the graph")
    options.pop("file", None)
    texts = [ConstantValue(_text(tx, arg)) for arg in args]
    tx.record_call(functools.partial(print, **options) if options else print, texts)
    return ConstantValue(None)


def _text(tx, value) -> str:
    """``str(value)`` as print makes it, known at capture time."""
    from ..exceptions import ExceptionValue
    from ..tensor import TensorValue

    if isinstance(value, TensorValue):
        raise GraphBreak("`print()` of a tensor: its text needs the tensor's values")
    if isinstance(value, ExceptionValue):
        text = value.to_text(tx, "str")
    elif value.is_constant():
        return str(value.as_constant())
    else:
        text = constant_protocol(tx, str, "`print()`", value)
    if text is None or not text.is_constant():
        raise GraphBreak(f"`print()` of {value.describe()}, whose text is not known at capture time")
    return text.as_constant()


HANDLERS = {"print": _print}
