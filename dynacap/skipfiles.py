"""Which code dynacap never captures as a frame: its own, the standard library, torch's.

A file is skipped when it lives under one of these directories (or a
prefix in ``config.skip_prefixes``): frames of its code run eagerly.  What a
*call* into torch's or the standard library's Python becomes while tracing
(a graph operation, traced, run eagerly...) is ``dynacap.trace_rules``'s
table; ``torch.nn`` module ``forward``s are handled by ``values.module``.
"""
from __future__ import annotations

import os
import sysconfig

import torch

from . import config

_DYNACAP_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
#: The corpus harness's stand-in layers (handed to user constructors) run inside captured code.
_HARNESS_DIR = os.path.join(_DYNACAP_DIR, "harness") + os.sep
#: Models of library functions (``dynacap.models``) are traced in their place.
_MODELS_DIR = os.path.join(_DYNACAP_DIR, "models") + os.sep
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_STDLIB_DIRS = tuple(
    os.path.abspath(p) + os.sep for p in {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]}
)
_SITE_DIRS = tuple(os.path.abspath(p) + os.sep for p in {sysconfig.get_paths()["purelib"],
                                                         sysconfig.get_paths()["platlib"]})
#: Libraries torch's compilers run (shape reasoning, kernel caches, code templates), for example while
#: a backward compiled lazily runs at a graph break: never user programs to capture.
_TORCH_DEPENDENCY_DIRS = tuple(os.path.join(site, name) + os.sep for site in _SITE_DIRS
                               for name in ("sympy", "mpmath", "filelock", "triton", "networkx", "jinja2", "numpy"))
#: Test runners: their import hooks and plugins run inside a captured function's eager parts (an
#: ``import`` or a warning there), never programs to capture.
_TEST_RUNNER_DIRS = tuple(os.path.join(site, name) + os.sep for site in _SITE_DIRS for name in ("_pytest", "pluggy"))

#: Backports of the standard library installed as packages: skipped like the standard library.
_STDLIB_BACKPORTS = frozenset(os.path.join(site, "typing_extensions.py") for site in _SITE_DIRS)


#: Absolute filename -> (whether its directory is always skipped, its absolute path): the directories are
#: fixed (``config.skip_prefixes`` is read at each call), and an absolute filename does not depend on the
#: working directory.
_ALWAYS_SKIPPED: dict[str, tuple[bool, str]] = {}


def is_skipped_file(filename: str) -> bool:
    if filename.startswith("<"):
        return filename.startswith(("<frozen", "<eval_with_key", "<dynacap"))
    known = _ALWAYS_SKIPPED.get(filename)
    if known is None:
        path = os.path.abspath(filename)
        known = (_always_skipped(path), path)
        if os.path.isabs(filename):
            _ALWAYS_SKIPPED[filename] = known
    skipped, path = known
    return skipped or any(path.startswith(p) for p in config.skip_prefixes)


def _always_skipped(path: str) -> bool:
    if path.startswith(_DYNACAP_DIR) and not path.startswith((_HARNESS_DIR, _MODELS_DIR)):
        return True
    if path.startswith(_TORCH_DIR) or path.startswith(_TORCH_DEPENDENCY_DIRS) or path.startswith(_TEST_RUNNER_DIRS):
        return True
    return path.startswith(_STDLIB_DIRS) and not path.startswith(_SITE_DIRS) or path in _STDLIB_BACKPORTS


def is_installed_library(filename: str) -> bool:
    """Whether ``filename`` belongs to an installed package, the standard library or dynacap itself (its models),
    not the user's code."""
    path = os.path.abspath(filename)
    return path.startswith((*_SITE_DIRS, *_STDLIB_DIRS, _TORCH_DIR, _DYNACAP_DIR))


_LAYER_DIR = os.path.join(_TORCH_DIR, "nn", "modules") + os.sep


_MODULE_BASE_FILE = os.path.join(_LAYER_DIR, "module.py")


#: Absolute filename -> whether it is a layer file (read for every global a layer's forward loads).
_LAYER_FILES: dict[str, bool] = {}


def is_layer_file(filename: str) -> bool:
    """A file of torch's built-in layers, whose methods may be inlined (never captured as frames).

    ``nn.Module``'s own file is not one: its methods (``__call__``, ``parameters()``,
    hooks) are handled by ``values.module`` or are graph breaks.
    """
    known = _LAYER_FILES.get(filename)
    if known is None:
        path = os.path.abspath(filename)
        known = path.startswith(_LAYER_DIR) and path != _MODULE_BASE_FILE
        if os.path.isabs(filename):
            _LAYER_FILES[filename] = known
    return known
