"""``dataclasses`` helpers, written in Python or traced as they are (their ``TRACED`` rules).

Models walk the fields as 3.11's do; they never create classes (``@dataclass`` runs at class
creation, which is not captured).
"""
from __future__ import annotations

MODELS: dict = {}
TRACED: dict = {}
