"""Exception-table regions of a 3.11 code object: which instructions a handler protects.

One place answers "is this instruction inside a ``try`` or a ``with``
block?" for the tracer (a ``yield`` that closing would interrupt, an
operation whose failure a ``try`` handler must see) and for the code
generator (where a break may be resumed).  Pure analysis of bytecode,
memoised per code object; it never traces.
"""
from __future__ import annotations

import dis
import functools
import types


@functools.lru_cache(maxsize=1024)
def exception_table(code: types.CodeType) -> tuple:
    """``(start, end, target, depth, lasti)`` entries of a 3.11 code object."""
    return tuple(dis._parse_exception_table(code))


def handler_at(code: types.CodeType, offset: int):
    """The exception-table entry that catches an exception raised at ``offset`` (None: it leaves the frame).

    3.11's table is flat: the first entry whose span holds the offset is the one CPython unwinds to.
    """
    for entry in exception_table(code):
        if entry.start <= offset < entry.end:
            return entry
    return None


def protected(code: types.CodeType, offset: int) -> bool:
    """Whether an exception raised at ``offset`` is caught in that frame (try, with, finally)."""
    return any(entry.start <= offset < entry.end for entry in exception_table(code))


@functools.lru_cache(maxsize=1024)
def _handlers(code: types.CodeType) -> tuple:
    """Per handler: ``(start, end, kind)`` with kind ``"try"`` or ``"with"`` (cleanup-only entries left out)."""
    by_offset = {i.offset: i for i in dis.get_instructions(code)}
    spans: dict[int, list[int]] = {}
    for entry in exception_table(code):
        span = spans.setdefault(entry.target, [entry.start, entry.end])
        span[0] = min(span[0], entry.start)
        span[1] = max(span[1], entry.end)
    handlers = []
    for target, (start, end) in spans.items():
        first, after = by_offset.get(target), by_offset.get(target + 2)
        if first is None or first.opname != "PUSH_EXC_INFO":
            continue
        kind = "with" if after is not None and after.opname == "WITH_EXCEPT_START" else "try"
        handlers.append((start, end, kind))
    return tuple(handlers)


def regions(code: types.CodeType, offset: int) -> tuple[int, int]:
    """(try regions, with regions) whose protected span contains ``offset``."""
    kinds = [kind for start, end, kind in _handlers(code) if start <= offset < end]
    return kinds.count("try"), kinds.count("with")


def in_try(code: types.CodeType, offset: int) -> bool:
    """Whether a ``try`` handler (``except``/``finally``) of the frame protects ``offset``."""
    return any(kind == "try" and start <= offset < end for start, end, kind in _handlers(code))
