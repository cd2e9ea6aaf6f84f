"""dynacap: capture PyTorch programs as FX graphs while they run (PEP 523, CPython 3.11).

Public API (see README.md): ``optimize``, ``explain``, ``reset``, ``disable``, ``allow_in_graph``,
``config``, ``register_backend``, ``list_backends``, ``Unsupported``,
``mark_dynamic``, ``mark_static``, ``maybe_mark_dynamic``, ``export``,
``capture_pre_autograd_graph``, ``ExportError``.
"""
from . import compiled_autograd, config
from .backends import list_backends, register_backend
from .dynamic import mark_dynamic, mark_static, maybe_mark_dynamic
from .errors import ConstraintViolation, Unsupported
from .explain import ExplainOutput, explain
from .export import ExportError, capture_pre_autograd_graph, export
from .logs import configure as _configure_logs
from .optimize import OptimizedModule, allow_in_graph, disable, optimize, reset

_configure_logs()

__all__ = [
    "optimize",
    "explain",
    "reset",
    "disable",
    "allow_in_graph",
    "config",
    "compiled_autograd",
    "register_backend",
    "list_backends",
    "Unsupported",
    "ConstraintViolation",
    "export",
    "capture_pre_autograd_graph",
    "ExportError",
    "mark_dynamic",
    "mark_static",
    "maybe_mark_dynamic",
    "OptimizedModule",
    "ExplainOutput",
]
__version__ = "0.1.0"
