"""The Python face of the C frame hook (``dynacap._C``).

``call_with_callback(callback, fn, ...)`` sets this thread's frame callback
for the duration of a call; the C side installs the PEP 523 hook only while some thread has
a callback, so code outside dynacap runs at full speed.  ``track``/``skip``
remember every code object given a cache entry or skip mark, so that
``reset()`` can drop them all.  No capture logic lives here.
"""
from __future__ import annotations

import weakref

# Imported from the C extension: ``call_with_callback(callback, fn, *args, **kwargs)`` is
# ``fn(*args, **kwargs)`` with ``callback`` as this thread's frame callback, restored afterwards (the
# per-call path of ``optimize``); ``drop_entries(code, guard)`` drops the entries of ``code`` whose
# guard is ``guard``.
from ._C import cache_entries as _entries_of, call_with_callback, clear_cache, drop_entries, set_skip  # noqa: F401

#: id(code) -> weak reference, for every code given an entry or a skip mark.  By identity: code
#: objects compare equal by value, and an unhooked copy (``code.replace()``) must not hide the original.
_tracked: dict[int, weakref.ref] = {}


def track(code) -> None:
    key = id(code)
    ref = _tracked.get(key)
    if ref is None or ref() is not code:
        _tracked[key] = weakref.ref(code, lambda _, key=key: _tracked.pop(key, None))


def skip(code) -> None:
    set_skip(code)
    track(code)


def cache_entries(code) -> list:
    return _entries_of(code)


def entries_made_by(owner) -> list[tuple]:
    """``(code, guard, rewritten code)`` of every cache entry the callback ``owner`` made."""
    found = []
    for ref in list(_tracked.values()):
        code = ref()
        if code is not None:
            found.extend((code, guard, rewritten) for guard, rewritten, o in cache_entries(code) if o is owner)
    return found


def reset_all() -> None:
    for ref in list(_tracked.values()):
        code = ref()
        if code is not None:
            clear_cache(code)
    _tracked.clear()
