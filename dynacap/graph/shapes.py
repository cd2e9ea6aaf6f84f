"""Symbolic shapes of one trace: torch's ``ShapeEnv``, symbolic fakes of the inputs, and their guards.

A trace with a symbolic input owns one ``ShapeEnv`` (``SymbolicShapes``);
its fake tensors have ``SymInt`` sizes where ``dynamic.ShapePolicy`` chose
symbolic dims, and int arguments chosen symbolic become ``SymInt``s too.
Every time Python code looks at a symbolic value (``if x.size(0) > 8``,
``range(n)``, ``int(s)``) the ShapeEnv records what the answer relied on;
``guards`` turns that record, once the backend has compiled (it may add its
own assumptions), into guard expressions over the frame (``L['x'].size()[0]``):

- relations and ranges (``2 <= L['x'].size()[0]``,
  ``L['y'].size()[0] == L['x'].size()[0]``) come from ``produce_guards``;
- a symbolic size or stride the trace specialized to a number (``int(s)``)
  needs an exact check that ``produce_guards`` leaves to its caller.

With ``config.capture_scalar_outputs`` / ``capture_dynamic_output_shape_ops``
the ShapeEnv also makes *unbacked* symbols for values read from tensor data
(``.item()``, the size of ``nonzero``): no guard can name them, so Python
code that needs one's value is a graph break (``values.symbolic``).

This module knows nothing about bytecode or values; ``dynamic.py`` decides
which dims are symbolic.
"""
from __future__ import annotations

import dataclasses

import torch
from torch._guards import Source as _TorchSource
from torch.fx.experimental.symbolic_shapes import (
    DimDynamic,
    RelaxedUnspecConstraint,
    ShapeEnv,
    StatelessSymbolicContext,
    StrictMinMaxConstraint,
)

from ..errors import BreakReason, ConstraintViolation, user_text
from ..source import Source

#: The symbolic scalar types (a size, a relation between sizes, a float computed from sizes).
SYMBOLIC = (torch.SymInt, torch.SymBool, torch.SymFloat)


class NeedsSymbolicShapes(Exception):
    """A trace without a ShapeEnv met an input that must be symbolic: capture traces again with one.

    Traces start without one (static shapes cost less to trace) unless the
    policy already knows the code has symbolic inputs.
    """


@dataclasses.dataclass(frozen=True)
class ShapeSource(_TorchSource):
    """A dynacap source as torch's ShapeEnv wants it: a frozen dataclass naming the input.

    It must be a dataclass (instances compare by field; the base class's
    field-less equality would make every input equal and drop guards), and
    ``name`` (built from ``_name_template``) is the text the guards contain.
    """

    text: str

    @property
    def _name_template(self) -> str:
        return self.text


@dataclasses.dataclass
class _Tracked:
    """A symbolic input: its fake (or ``SymInt``), where it came from, and its sizes and strides as faked."""

    fake: object
    source: Source
    context: StatelessSymbolicContext | None
    sizes: tuple = ()
    strides: tuple = ()


class SymbolicShapes:
    """The ShapeEnv of one trace and the symbolic inputs made in it."""

    def __init__(self):
        from .. import config

        # Data-dependent results (``.item()``, ``nonzero``) get unbacked symbols only when asked for;
        # otherwise fake propagation raises and the operation is a graph break.
        self.env = ShapeEnv(allow_scalar_outputs=config.capture_scalar_outputs,
                            allow_dynamic_output_shape_ops=config.capture_dynamic_output_shape_ops)
        self._tracked: list[_Tracked] = []
        #: Whether an operation made an unbacked (data-dependent) symbol.
        self.unbacked = False

    def bind_unbacked(self, fake) -> dict | None:
        """Where in ``fake`` (an operation's result) the unbacked symbols it just made are
        (``node.meta["unbacked_bindings"]``, which graph passes read); None when it made none."""
        if not self.env.pending_fresh_unbacked_symbols:
            return None
        from torch.fx.experimental.symbolic_shapes import compute_unbacked_bindings

        self.unbacked = True
        return compute_unbacked_bindings(self.env, fake)

    def fake_tensor(self, mode, tensor: torch.Tensor, source: Source, choices) -> torch.Tensor:
        """The fake of an input tensor whose dims are chosen by ``choices`` (``dynamic.DimChoice``s)."""
        dims, constraints = [], []
        for c in choices:
            dims.append(DimDynamic.DYNAMIC if c.symbolic else DimDynamic.STATIC)
            if not c.symbolic:
                constraints.append(None)
            elif c.strict and (c.min is not None or c.max is not None):
                from torch.utils._sympy.value_ranges import ValueRanges

                low = 0 if c.min is None else c.min
                high = c.max if c.max is not None else torch.utils._sympy.numbers.int_oo
                constraints.append(StrictMinMaxConstraint(warn_only=False, vr=ValueRanges(low, high)))
            else:
                constraints.append(RelaxedUnspecConstraint(warn_only=not c.strict))
        context = StatelessSymbolicContext(dynamic_sizes=dims, constraint_sizes=constraints)
        from torch.fx.experimental.symbolic_shapes import ConstraintViolationError

        try:
            fake = mode.from_tensor(tensor, source=ShapeSource(source.expr()), symbolic_context=context)
        except ConstraintViolationError as e:
            raise ConstraintViolation(BreakReason(user_text(
                f"{source.expr()} has sizes {tuple(tensor.shape)}, outside the range dynacap.mark_dynamic "
                f"gave: {e}"))) from None
        self._tracked.append(_Tracked(fake, source, context, tuple(fake.shape), tuple(fake.stride())))
        return fake

    def symint(self, value: int, source: Source) -> torch.SymInt:
        """A ``SymInt`` standing for an int argument (no range: any int other than 0 and 1 fits)."""
        sym = self.env.create_unspecified_symint_and_symbol(value, ShapeSource(source.expr()), DimDynamic.DYNAMIC)
        self._tracked.append(_Tracked(sym, source, None))
        return sym

    def guards(self) -> tuple[list[str], list[Source]]:
        """The trace's symbolic guards (expressions) and the sources they read; call after the backend compiled.

        A ``mark_dynamic`` dim the trace specialized raises ``ConstraintViolation`` (the
        user asked for a graph that works for every size).
        """
        from torch.fx.experimental.symbolic_shapes import ConstraintViolationError

        out = []
        for t in self._tracked:
            if t.context is None:
                continue
            base = t.source.expr()
            for what, values in (("size", t.sizes), ("stride", t.strides)):
                for i, v in enumerate(values):
                    if isinstance(v, torch.SymInt):
                        fixed = self.env.replace(v.node.expr)
                        if fixed.is_number:
                            out.append(f"{base}.{what}()[{i}] == {int(fixed)}")
        try:
            produced = self.env.produce_guards(
                [t.fake for t in self._tracked], [ShapeSource(t.source.expr()) for t in self._tracked],
                source_ref=lambda s: s.name, input_contexts=[t.context for t in self._tracked],
                ignore_static=True)
        except ConstraintViolationError as e:
            raise ConstraintViolation(BreakReason(user_text(
                f"a dim marked dynamic (dynacap.mark_dynamic) was specialized by the code: {e}"))) from None
        self.env.freeze()
        return out + list(produced), [t.source for t in self._tracked]

    def is_static(self) -> bool:
        """Whether nothing in the trace is symbolic (so guards and backends can treat it as static)."""
        return not self._tracked and not self.unbacked

