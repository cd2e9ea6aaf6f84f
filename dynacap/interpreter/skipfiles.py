"""Which code dynacap never captures or inlines: its own, the standard library, torch's.

A file is skipped when it lives under one of these directories (or a
prefix in ``config.skip_prefixes``).  Torch functions are not inlined but
recorded as graph operations (see ``values.torch_ns``); ``torch.nn``
module ``forward``s are handled by ``values.module``.
"""
from __future__ import annotations

import dataclasses
import os
import sysconfig
import types
import typing

import torch

from .. import config

_DYNACAP_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
#: The corpus harness's stand-in layers (handed to user constructors) run inside captured code.
_HARNESS_DIR = os.path.join(_DYNACAP_DIR, "harness") + os.sep
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_STDLIB_DIRS = tuple(
    os.path.abspath(p) + os.sep for p in {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]}
)
_SITE_DIRS = tuple(os.path.abspath(p) + os.sep for p in {sysconfig.get_paths()["purelib"],
                                                         sysconfig.get_paths()["platlib"]})
#: Libraries torch's compilers run (shape reasoning, kernel caches, code templates), for example while
#: a backward compiled lazily runs at a graph break: never user programs to capture.
_TORCH_DEPENDENCY_DIRS = tuple(os.path.join(site, name) + os.sep for site in _SITE_DIRS
                               for name in ("sympy", "mpmath", "filelock", "triton", "networkx", "jinja2"))


def is_skipped_file(filename: str) -> bool:
    if filename.startswith("<"):
        return filename.startswith(("<frozen", "<eval_with_key", "<dynacap"))
    path = os.path.abspath(filename)
    if path.startswith(_DYNACAP_DIR) and not path.startswith(_HARNESS_DIR):
        return True
    if path.startswith(_TORCH_DIR) or path.startswith(_TORCH_DEPENDENCY_DIRS):
        return True
    if path.startswith(_STDLIB_DIRS) and not path.startswith(_SITE_DIRS):
        return True
    return any(path.startswith(p) for p in config.skip_prefixes)


_LAYER_DIR = os.path.join(_TORCH_DIR, "nn", "modules") + os.sep


_MODULE_BASE_FILE = os.path.join(_LAYER_DIR, "module.py")


def is_layer_file(filename: str) -> bool:
    """A file of torch's built-in layers, whose methods may be inlined (never captured as frames).

    ``nn.Module``'s own file is not one: its methods (``__call__``, ``parameters()``,
    hooks) are handled by ``values.module`` or are graph breaks.
    """
    path = os.path.abspath(filename)
    return path.startswith(_LAYER_DIR) and path != _MODULE_BASE_FILE


def _with_nested(*functions) -> frozenset:
    """The code objects of ``functions`` and of the functions, lambdas and comprehensions inside them."""
    codes, todo = set(), [f.__code__ for f in functions]
    while todo:
        code = todo.pop()
        codes.add(code)
        todo.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return frozenset(codes)


#: Standard-library functions traced like user code, although their files are skipped: pure Python
#: whose only effect is their result, met in models' own code (``dataclasses.fields`` in
#: ``ModelOutput.__post_init__``, ``typing.cast`` in library helpers).
_INLINED_LIBRARY_CODE = _with_nested(dataclasses.fields, typing.cast)


def is_inlined_library_code(code) -> bool:
    return code in _INLINED_LIBRARY_CODE
