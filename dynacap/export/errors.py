"""``ExportError``: why a program cannot be exported as one whole graph, at the user's lines.

A graph break, a dim asked dynamic that the code specialized, or a lowering
failure (mapped back to the user's line through the node's ``stack_trace``)
all raise it.  It is an ``Unsupported``, so code that catches
``fullgraph=True``'s error catches it too.  Nothing here imports torch.
"""
from __future__ import annotations

from ..errors import BreakReason, Unsupported


class ExportError(Unsupported):
    """The program cannot be exported as one graph: ``break_reasons`` names every cause (file:line, reason)."""

    def __init__(self, reasons: list[BreakReason], note: str | None = None):
        reasons = list(reasons) or [BreakReason("nothing was captured")]
        super().__init__(reasons[0])
        self.break_reasons = reasons
        if len(reasons) > 1 or note:
            lines = [f"{len(reasons)} graph breaks:"] if len(reasons) > 1 else [self.args[0]]
            for i, reason in enumerate(reasons if len(reasons) > 1 else (), 1):
                text = str(reason).split("\n")
                lines.append(f"{i}. {reason.location()}: {text[0]}")
                lines.extend("   " + line for line in text[1:])
            if note:
                lines.append(note)
            self.args = ("\n".join(lines),)
