"""``with torch.autocast(...)`` blocks inside captured code.

Entering records ``torch.amp.autocast_mode._enter_autocast(...)`` in the
graph (its result is the context the matching ``_exit_autocast`` node
closes) and enters a real autocast context for the rest of the trace, so
fake propagation sees the same dtypes as the run.  The tracer remembers
entered contexts in ``TraceContext.autocasts`` and leaves them when the
trace ends, whatever happens.  A break inside the block resumes *at* the
breaking instruction: the resume function's prefix re-enters the block
through an ``AutocastFactory``.
"""
from __future__ import annotations

import torch
from torch.amp import autocast_mode

from ..errors import GraphBreak
from .base import Value
from .constant import ConstantValue


class AutocastFactory:
    """A zero-argument callable making ``torch.autocast(*args, **kwargs)`` (a resume prefix calls it)."""

    def __init__(self, args: tuple, kwargs: dict):
        self.args = args
        self.kwargs = kwargs

    def __call__(self):
        return torch.autocast(*self.args, **self.kwargs)

    def __repr__(self):
        return f"AutocastFactory{self.args}{self.kwargs}"

    def _key(self):
        return (self.args, tuple(sorted(self.kwargs.items())))

    def __eq__(self, other):  # equal factories share one memoised resume function
        return isinstance(other, AutocastFactory) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())


class AutocastFactoryValue(Value):
    """An ``AutocastFactory`` in generated code: calling it makes the (not yet entered) block."""

    def __init__(self, factory: AutocastFactory, source=None):
        self.factory = factory
        self.source = source

    def describe(self):
        return repr(self.factory)

    def real_object(self):
        return self.factory

    def call(self, tx, args, kwargs):
        return AutocastValue(self.factory.args, self.factory.kwargs)


class AutocastValue(Value):
    """A ``torch.autocast(...)`` instance with constant arguments, not yet entered."""

    def __init__(self, args: tuple, kwargs: dict):
        self.args = args
        self.kwargs = kwargs

    def describe(self):
        return f"torch.autocast{self.args}"

    def python_type(self):
        return torch.autocast

    def enter(self, tx) -> Value:
        real = torch.autocast(*self.args, **self.kwargs)
        params = (real.device, real.fast_dtype, real._enabled, real._cache_enabled)
        node = tx.graph.graph.call_function(autocast_mode._enter_autocast, params)
        tx.graph.created.append(node)
        real.__enter__()
        tx.ctx.autocasts.append(real)
        tx.push(AutocastExitValue(self, real, node))
        return ConstantValue(None)


class AutocastExitValue(Value):
    """The bound ``__exit__`` of an entered autocast block."""

    def __init__(self, ctx: AutocastValue, real, enter_node):
        self.ctx = ctx
        self.real = real
        self.enter_node = enter_node

    def describe(self):
        return f"__exit__ of {self.ctx.describe()}"

    def factory(self) -> AutocastFactory:
        return AutocastFactory(self.ctx.args, self.ctx.kwargs)

    def close_in_graph(self, tx) -> None:
        node = tx.graph.graph.call_function(autocast_mode._exit_autocast, (self.enter_node,))
        tx.graph.created.append(node)

    def call(self, tx, args, kwargs):
        if not tx.ctx.autocasts or tx.ctx.autocasts[-1] is not self.real:
            raise GraphBreak("autocast blocks exited out of order")
        self.close_in_graph(tx)
        tx.ctx.autocasts.pop().__exit__(None, None, None)
        return ConstantValue(None)


def make_autocast(args: list[Value], kwargs: dict[str, Value]) -> AutocastValue:
    if not all(a.is_constant() for a in args) or not all(v.is_constant() for v in kwargs.values()):
        raise GraphBreak("torch.autocast with arguments that are not constants")
    return AutocastValue(tuple(a.as_constant() for a in args), {k: v.as_constant() for k, v in kwargs.items()})
