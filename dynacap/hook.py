"""The Python face of the C frame hook (``dynacap._C``).

``call_with_callback(callback, fn, ...)`` sets this thread's frame callback
for the duration of a call; the C side installs the PEP 523 hook only while some thread has
a callback, so code outside dynacap runs at full speed.  ``tracked_codes``
remembers every code object given a cache entry or skip mark, so that
``reset()`` can drop them all.  No capture logic lives here.
"""
from __future__ import annotations

import weakref

from . import _C

_tracked = weakref.WeakSet()


#: ``call_with_callback(callback, fn, *args, **kwargs)``: ``fn(*args, **kwargs)`` with ``callback``
#: as this thread's frame callback, restored afterwards (in C: the per-call path of ``optimize``).
call_with_callback = _C.call_with_callback


def track(code) -> None:
    _tracked.add(code)


def skip(code) -> None:
    _C.set_skip(code)
    _tracked.add(code)


def cache_entries(code) -> list:
    return _C.cache_entries(code)


def reset_all() -> None:
    for code in list(_tracked):
        _C.clear_cache(code)
    _tracked.clear()
