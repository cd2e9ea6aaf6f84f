"""``print`` as a logging call replayed after the graph, when ``config.reorderable_logging_functions``
holds it: each argument's text made at capture time, where eager makes it (``str()`` of a constant,
an exception or a user object, its ``__str__`` traced), and ``print`` called with those texts after
the graph, in program order with the frame's other side effects.  A tensor argument (its text needs
its values), a ``file`` other than sys.stdout or a plain text stream from the frame (a ``StringIO``, a
text file: their writes run no user code) and anything whose text is not known now are breaks.
Off by default: a break, as in torch.compile.

``buf.write(text)`` on an ``io.StringIO`` from the frame is not logging but a write into an argument: a
text known now is written after the graph, in program order, whatever the config (a write runs no
user code; the buffer's other methods, the ones that read it, break, and a break replays the writes
before them).
"""
from __future__ import annotations

import io

from ... import config
from ...errors import GraphBreak
from ...source import AttrSource
from ..base import Value
from ..constant import ConstantValue
from ..protocols import constant_protocol


def _print(tx, args, kwargs):
    if print not in config.reorderable_logging_functions:
        return None
    options = {"sep": None, "end": None, "flush": False}
    for name, value in kwargs.items():
        if name in options and value.is_constant():
            options[name] = value.as_constant()
        elif name != "file":
            raise GraphBreak(f"`print()` with {name}= {value.describe()}, which is not known at capture time")
    stream = kwargs.get("file", ConstantValue(None))
    if not (stream.is_constant() and stream.as_constant() is None or _plain_stream(stream)):
        raise GraphBreak(f"`print(file=...)` to {stream.describe()}: only sys.stdout and io.StringIO or text file "
                         "objects from the frame are written after the graph")
    texts = [ConstantValue(_text(tx, arg)) for arg in args]
    tx.record_call(replay_print, [stream, *(ConstantValue(options[k]) for k in ("sep", "end", "flush")), *texts])
    return ConstantValue(None)


def replay_print(file, sep, end, flush, *texts) -> None:
    """What the rewritten code calls after the graph: eager's ``print`` with the texts made at capture time."""
    print(*texts, sep=sep, end=end, file=file, flush=flush)


def _plain_stream(value) -> bool:
    """A text stream from the frame whose writes run no user code (so nothing the trace reads can see them)."""
    from ..objects import ObjectValue

    return isinstance(value, ObjectValue) and value.source is not None and type(value.obj) in _PLAIN_STREAMS


_PLAIN_STREAMS = (io.StringIO, io.TextIOWrapper)


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


def stream_method(value, name: str) -> Value | None:
    """``value.<name>`` when it is ``write`` of an ``io.StringIO`` read from the frame, else None."""
    if name != "write" or type(value.obj) is not io.StringIO or value.source is None:
        return None
    return _StringWrite(value)


class _StringWrite(Value):
    """``buf.write`` bound to a frame ``io.StringIO``: the write recorded, replayed after the graph."""

    def __init__(self, stream):
        self.stream = stream

    def describe(self):
        return f"method write of {self.stream.describe()}"

    def call(self, tx, args, kwargs):
        from ..exceptions import python_error

        if kwargs or len(args) != 1:
            raise GraphBreak(f"{self.describe()} takes one positional argument (TypeError at run time)")
        text = args[0].as_constant() if args[0].is_constant() else None
        if type(text) is not str:
            raise GraphBreak(f"{self.describe()} of {args[0].describe()}, which is not a str known at capture time")
        closed = self.stream.obj.closed  # a getset of the C type: runs no user code
        tx.guards.equals_match(AttrSource(self.stream.source, "closed"), closed)
        if closed:
            raise python_error(ValueError, "I/O operation on closed file")
        tx.record_call(io.StringIO.write, [self.stream, ConstantValue(text)])
        return ConstantValue(len(text))  # what StringIO.write returns: the characters given


HANDLERS = {"print": _print}
