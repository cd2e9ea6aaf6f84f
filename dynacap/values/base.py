"""The base ``Value``: what the symbolic interpreter pushes on its stack.

A ``Value`` stands for a Python object the traced program would hold at
run time.  Each kind (tensor, constant, container, module, function, ...)
lives in its own module of ``dynacap.values`` and overrides only the
operations it supports; everything else raises ``GraphBreak`` with a
user-facing reason.  Values never emit graph nodes themselves except
through the tracer's ``GraphBuilder`` (``tx.graph``).

``tx`` is the interpreter's ``Tracer`` and ``cg`` codegen's ``Emitter``,
both passed in: values never import the interpreter or codegen (they sit
below them), so those names are annotations only.
"""
from __future__ import annotations

from ..errors import GraphBreak
from ..source import Source


class Value:
    """A symbolic stand-in for one runtime object."""

    source: Source | None = None

    def kind(self) -> str:
        return type(self).__name__.removesuffix("Value").lower() or "value"

    # -- identity and constness ------------------------------------------------
    def python_type(self) -> type:
        raise GraphBreak(f"the type of {self.describe()} is not known at capture time")

    def is_constant(self) -> bool:
        return False

    def as_constant(self):
        raise GraphBreak(f"{self.describe()} is used where a Python constant is needed")

    def real_object(self):
        """The runtime object itself when the value stands for one known object, else raise."""
        raise GraphBreak(f"{self.describe()} has no single runtime object")

    def describe(self) -> str:
        where = f" ({self.source.expr()})" if self.source is not None else ""
        return f"a {self.kind()} value{where}"

    # -- operations -------------------------------------------------------------
    def getattr(self, tx: "Tracer", name: str) -> "Value":
        raise GraphBreak(f"attribute `.{name}` of {self.describe()} is not supported")

    def setattr(self, tx: "Tracer", name: str, value: "Value") -> None:
        raise GraphBreak(f"assigning attribute `.{name}` on {self.describe()} is not supported")

    def call(self, tx: "Tracer", args: list["Value"], kwargs: dict[str, "Value"]) -> "Value":
        raise GraphBreak(f"calling {self.describe()} is not supported")

    def iterate(self, tx: "Tracer") -> list["Value"]:
        raise GraphBreak(f"iterating over {self.describe()} is not supported")

    def truth(self, tx: "Tracer") -> bool:
        raise GraphBreak(f"the truth value of {self.describe()} is not known at capture time")

    def getitem(self, tx: "Tracer", index: "Value") -> "Value":
        raise GraphBreak(f"indexing {self.describe()} is not supported")

    # -- code generation ----------------------------------------------------------
    def reconstruct(self, cg: "Emitter") -> None:
        """Emit bytecode that pushes this value at run time."""
        if self.source is not None:
            cg.extend(self.source.emit())
            return
        try:
            obj = self.real_object()
        except GraphBreak:
            raise GraphBreak(f"{self.describe()} cannot be rebuilt after the graph") from None
        cg.load_const(obj)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.describe()}>"


class DeletedValue(Value):
    """What the trace's overrides hold for a global or attribute the traced code deleted."""

    def describe(self) -> str:
        return "a deleted name"


DELETED = DeletedValue()


class NullValue(Value):
    """The NULL that 3.11's ``PUSH_NULL`` / ``LOAD_GLOBAL`` put below a callable."""

    def describe(self) -> str:
        return "NULL"

    def reconstruct(self, cg: "Emitter") -> None:
        cg.append("PUSH_NULL")


def constant_args(args, kwargs) -> tuple[list, dict] | None:
    """Python values of ``args``/``kwargs`` if all are constants, else None."""
    if not all(a.is_constant() for a in args) or not all(v.is_constant() for v in kwargs.values()):
        return None
    return [a.as_constant() for a in args], {k: v.as_constant() for k, v in kwargs.items()}
