"""``operator``'s functions and callables, written in Python: traced in place of the C ones.

Each model does what the C function does, by the same Python operation (``a += b`` calls
``__iadd__`` and falls back to ``__add__`` as ``operator.iadd`` does), so the interpreter's own
semantics of the operation apply.  ``itemgetter``/``attrgetter``/``methodcaller`` return a function
made in the trace (one made there never leaves the graph: a break there is clean).
"""
from __future__ import annotations

MODELS: dict = {}
TRACED: dict = {}
