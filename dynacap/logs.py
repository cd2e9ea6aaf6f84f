"""Log channels selected by the ``DYNACAP_LOGS`` environment variable.

``DYNACAP_LOGS=graph,guards,breaks,recompiles,bytecode,code,compiled_autograd`` (or ``all``) turns on
the named channels; each is a standard ``logging`` logger named
``dynacap.<channel>``, so applications can also configure them directly.
Only logging setup lives here.
"""
from __future__ import annotations

import logging
import os

CHANNELS = ("graph", "guards", "breaks", "recompiles", "bytecode", "code", "compiled_autograd")


def get(channel: str) -> logging.Logger:
    assert channel in CHANNELS, channel
    return logging.getLogger(f"dynacap.{channel}")


def configure(spec: str | None = None) -> list[str]:
    """Enable the channels in ``spec`` (default: ``$DYNACAP_LOGS``); returns the enabled names."""
    if spec is None:
        spec = os.environ.get("DYNACAP_LOGS", "")
    names = [n.strip() for n in spec.split(",") if n.strip()]
    if "all" in names:
        names = list(CHANNELS)
    unknown = [n for n in names if n not in CHANNELS]
    if unknown:
        logging.getLogger("dynacap").warning(
            "DYNACAP_LOGS: unknown channel(s) %s; known: %s", unknown, ", ".join(CHANNELS)
        )
    enabled = [n for n in names if n in CHANNELS]
    for name in enabled:
        logger = get(name)
        logger.setLevel(logging.DEBUG)
        if not any(getattr(h, "_dynacap", False) for h in logger.handlers):
            handler = logging.StreamHandler()
            handler.setFormatter(logging.Formatter(f"[dynacap.{name}] %(message)s"))
            handler._dynacap = True
            logger.addHandler(handler)
    return enabled
