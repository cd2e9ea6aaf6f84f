"""Importing a case's code inside the worker (sys.path, relative imports, stubs).

Runs inside the sandboxed case worker, never in the harness process.  Given a
case it puts the project root (and ``src/``, and the file's own folder) on
``sys.path``, imports the file under its dotted package name so relative
imports work (falling back to loading it by path), stubs missing third-party
packages one at a time, and returns the target object.  It must not guess
arguments or run the target.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys

from . import stubs

MAX_STUBS = 24


class ImportFailure(Exception):
    """The case's module or target could not be loaded."""


def _bases(case) -> list[str]:
    root = os.path.abspath(case.root)
    out = []
    src = os.path.join(root, "src")
    if case.file:
        f = os.path.join(root, case.file)
        if os.path.isdir(src) and os.path.abspath(f).startswith(src + os.sep):
            out.append(src)
    out.append(root)
    if os.path.isdir(src) and src not in out:
        out.append(src)
    return out


def dotted_name(case) -> tuple[str | None, str | None]:
    """(dotted module name, sys.path base) for a file case, or (None, None)."""
    path = os.path.abspath(os.path.join(case.root, case.file))
    for base in _bases(case):
        if not path.startswith(base + os.sep):
            continue
        rel = os.path.relpath(path, base)[:-3].split(os.sep)
        if rel[-1] == "__init__":
            rel = rel[:-1]
        if rel and all(p.isidentifier() for p in rel):
            return ".".join(rel), base
    return None, None


def _is_project_name(case, top: str) -> bool:
    for base in _bases(case):
        if os.path.exists(os.path.join(base, top + ".py")) or os.path.isdir(os.path.join(base, top)):
            return True
    return False


def setup_path(case) -> None:
    for base in reversed(_bases(case)):
        if base not in sys.path:
            sys.path.insert(0, base)
    if case.file:
        d = os.path.dirname(os.path.abspath(os.path.join(case.root, case.file)))
        if d not in sys.path:
            sys.path.append(d)


def _import_once(case):
    if case.module:
        return importlib.import_module(case.module)
    name, _ = dotted_name(case)
    if name:
        return importlib.import_module(name)
    path = os.path.abspath(os.path.join(case.root, case.file))
    modname = "dynacap_case_" + "".join(c if c.isalnum() else "_" for c in case.file[:-3])
    spec = importlib.util.spec_from_file_location(modname, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[modname] = mod
    spec.loader.exec_module(mod)
    return mod


def import_module(case, stubbed: list[str] | None = None) -> tuple[object, list[str]]:
    """Import the case's module; returns (module, names that were stubbed).

    ``stubbed`` (appended to as names get stubbed) still tells what was
    stubbed when the import fails after all."""
    setup_path(case)
    finder = stubs.finder()
    stubbed = [] if stubbed is None else stubbed
    for _ in range(MAX_STUBS + 1):
        before = set(sys.modules)
        try:
            return _import_once(case), stubbed
        except ModuleNotFoundError as e:
            missing = e.name
            if (not missing or finder.covers(missing) or _is_project_name(case, missing.split(".")[0])
                    or len(stubbed) >= MAX_STUBS):
                raise
            finder.add(missing)
            stubbed.append(missing)
            for k in set(sys.modules) - before:
                sys.modules.pop(k, None)
    raise ImportFailure("too many missing imports")


def resolve(module, qualname: str):
    obj = module
    for part in qualname.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ImportFailure(f"{getattr(module, '__name__', module)!s} has no attribute {qualname!r}")
    return obj
