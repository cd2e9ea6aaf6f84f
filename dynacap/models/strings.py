"""String formatting, written in Python: ``str.join`` and ``%`` with values the trace holds.
"""
from __future__ import annotations

MODELS: dict = {}
TRACED: dict = {}
