"""Calls into torch's and the standard library's Python, as their trace rule says (``dynacap.trace_rules``).

``call_by_rule`` is the one place a rule turns into a value: a graph node, an
inlined call, a constant, a break with the rule's reason, or a model traced in
the function's place.  ``LibraryCallableValue`` is a library callable outside
torch with a rule (``itertools.chain``): it stays the real object for guards
and rebuilding, and its calls follow the rule.
"""
from __future__ import annotations

import types

from .. import trace_rules
from ..errors import GraphBreak
from ..trace_rules import Rule, TraceRule
from .base import Value, constant_args
from .constant import ConstantValue


def call_by_rule(tx, fn_value: Value, rule: TraceRule, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """Call torch's (or a library's) ``fn_value`` as its trace rule says (``dynacap.trace_rules``)."""
    fn = fn_value.real_object()
    what = f"`{getattr(fn, '__module__', None) or 'torch'}.{getattr(fn, '__qualname__', fn)}`"
    disabled = getattr(fn, _DISABLED_MARKER, None) if isinstance(fn, types.FunctionType) else None
    if disabled is not None:
        return _call_disabled(tx, disabled, what, args, kwargs)
    if rule.rule is Rule.EAGER:
        raise GraphBreak(f"{what} {rule.why}")
    if rule.rule is Rule.COMPILER:
        if isinstance(fn, type):
            from .null_context import NullContextValue

            return NullContextValue(what, rule.why)
        return ConstantValue(rule.answer)
    if rule.rule is Rule.FOLD:
        const = constant_args(args, kwargs)
        if const is None:
            raise GraphBreak(f"{what} on values known only at run time")
        return ConstantValue(fn(*const[0], **const[1]))
    if rule.rule is Rule.MODEL:
        from .wrap import wrap

        model, eager_reason = rule.answer
        # Keyword arguments known only at run time stay Values: never None, never False.
        reason = eager_reason({k: v.as_constant() if v.is_constant() else v for k, v in kwargs.items()})
        if reason is not None:
            raise GraphBreak(f"{what}: {reason}")
        if rule.model_takes_wrapped:
            args = [wrap(tx, fn.__wrapped__, None), *args]
        return wrap(tx, model, None).call(tx, args, kwargs)
    if rule.rule is Rule.SEE_THROUGH:
        from .wrap import wrap

        return wrap(tx, fn.__wrapped__, None).call(tx, args, kwargs)
    if rule.rule is Rule.INLINE and isinstance(fn, types.FunctionType):
        from .functions import UserFunctionValue

        function = UserFunctionValue(fn, fn_value.source)
        function.library_ok = True
        return tx.inline_call(function, args, kwargs)
    name = getattr(fn, "__name__", repr(fn))
    return tx.graph.call("call_function", fn, args, kwargs, f"torch.{name}")


#: What ``torch.compiler.disable`` leaves on the function it returns: the function it wraps.
_DISABLED_MARKER = "_torchdynamo_orig_callable"


def _call_disabled(tx, wrapped, what: str, args, kwargs) -> Value:
    """A call of a function ``torch.compiler.disable`` returned.

    Around torch's own functions (another compiler marks some for itself once it is imported, such as
    optimizers' ``_init_group``) the wrapped function is traced under its rule; around the user's it is
    a break, disabled by the user, and that code's own frame is never captured either.
    """
    from .wrap import wrap

    code = getattr(getattr(wrapped, "__func__", wrapped), "__code__", None)
    if code is None or trace_rules.rule_for_code(code) is None:
        if code is not None:
            from .. import hook

            hook.skip(code)
        raise GraphBreak(f"{what} is disabled by the user (torch.compiler.disable)")
    return wrap(tx, wrapped, None).call(tx, args, kwargs)


class LibraryCallableValue(Value):
    def __init__(self, obj, rule: TraceRule, source=None):
        self.obj = obj
        self.rule = rule
        self.source = source

    def describe(self):
        return f"`{getattr(self.obj, '__module__', '')}.{getattr(self.obj, '__qualname__', self.obj)}`"

    def real_object(self):
        return self.obj

    def python_type(self):
        return type(self.obj)

    def getattr(self, tx, name):
        from ..source import AttrSource
        from .wrap import wrap

        if not isinstance(self.obj, type) or not hasattr(self.obj, name):
            return super().getattr(tx, name)
        # A class's attributes (``chain.from_iterable``) are wrapped as anything read from it.
        return wrap(tx, getattr(self.obj, name), AttrSource(self.source, name) if self.source is not None else None)

    def call(self, tx, args, kwargs):
        return call_by_rule(tx, self, self.rule, args, kwargs)
