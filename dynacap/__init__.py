"""dynacap: capture PyTorch programs as FX graphs while they run (PEP 523, CPython 3.11).

Public API (see README.md): ``optimize``, ``explain``, ``reset``, ``disable``,
``config``, ``register_backend``, ``list_backends``, ``Unsupported``.
"""
from . import config
from .backends import list_backends, register_backend
from .errors import Unsupported
from .explain import ExplainOutput, explain
from .logs import configure as _configure_logs
from .optimize import OptimizedModule, disable, optimize, reset

_configure_logs()

__all__ = [
    "optimize",
    "explain",
    "reset",
    "disable",
    "config",
    "register_backend",
    "list_backends",
    "Unsupported",
    "OptimizedModule",
    "ExplainOutput",
]
__version__ = "0.1.0"
