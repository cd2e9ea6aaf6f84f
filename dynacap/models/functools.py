"""``functools``' decorators and descriptors, written in Python: traced in place of the real ones.

The real ones take locks (``cached_property``), keep weak caches keyed by ABC tokens
(``singledispatch``) or are C (``cmp_to_key``); the models do what they do to the values a trace
holds.  Anything outside what a model follows (an ABC registered with ``singledispatch``) is a
break with the reason, never a different answer.
"""
from __future__ import annotations

MODELS: dict = {}
TRACED: dict = {}
