"""Stub modules standing in for third-party imports a project lacks.

Runs inside the case worker.  When a project file fails on
``ModuleNotFoundError`` for a package that is not installed, the loader
registers that name here and imports the file again; the stub then answers
every attribute with a permissive dummy (subclassable, callable, usable as a
decorator), so the rest of the file loads.  Only names the loader registers
are stubbed: ``try: import x / except ImportError`` in user code keeps working.
This module must not decide *what* to stub, nor import user code.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import inspect
import sys
import types


class _StubMeta(type):
    def __getattr__(cls, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return make_stub_class(f"{cls.__qualname__}.{name}")

    def __call__(cls, *args, **kwargs):
        # ``@stub.decorator`` keeps the decorated function or class.
        if cls.__dict__.get("_dc_stub_root") and len(args) == 1 and not kwargs and (
                inspect.isfunction(args[0]) or inspect.isclass(args[0])):
            return args[0]
        return super().__call__(*args, **kwargs)

    def __getitem__(cls, item):
        return cls

    def __iter__(cls):
        return iter(())

    def __bool__(cls):
        return False


class StubObject(metaclass=_StubMeta):
    """Instances of stub classes: every use gives back another stub."""

    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return make_stub_class(name)()

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and (inspect.isfunction(args[0]) or inspect.isclass(args[0])):
            return args[0]
        return StubObject()

    def __getitem__(self, item):
        return StubObject()

    def __iter__(self):
        return iter(())

    def __bool__(self):
        return False

    def __len__(self):
        return 0


def make_stub_class(name: str) -> type:
    short = name.rsplit(".", 1)[-1] or "Stub"
    cls = _StubMeta(short, (StubObject,), {"_dc_stub_root": True, "__module__": "dynacap_stub"})
    cls.__qualname__ = name
    return cls


class StubModule(types.ModuleType):
    """A module whose every missing attribute is a stub class."""

    def __init__(self, name):
        super().__init__(name)
        self.__path__ = []          # a package: submodules come through the finder
        self.__all__ = []
        self.__dynacap_stub__ = True

    def __getattr__(self, name):
        if name == "__version__":
            return "0.0.0"
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        value = make_stub_class(f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


class _StubLoader(importlib.abc.Loader):
    def create_module(self, spec):
        return StubModule(spec.name)

    def exec_module(self, module):
        pass


class StubFinder(importlib.abc.MetaPathFinder):
    """Meta-path finder answering only for registered names and their children."""

    def __init__(self):
        self.names: list[str] = []

    def add(self, name: str) -> None:
        if name not in self.names:
            self.names.append(name)

    def covers(self, fullname: str) -> bool:
        return any(fullname == n or fullname.startswith(n + ".") for n in self.names)

    def find_spec(self, fullname, path=None, target=None):
        if self.covers(fullname):
            return importlib.machinery.ModuleSpec(fullname, _StubLoader(), is_package=True)
        return None


_FINDER: StubFinder | None = None


def finder() -> StubFinder:
    """The process-wide finder, installed first on ``sys.meta_path``."""
    global _FINDER
    if _FINDER is None:
        _FINDER = StubFinder()
        sys.meta_path.insert(0, _FINDER)
    return _FINDER


def is_stub(obj) -> bool:
    return isinstance(obj, (StubModule, StubObject)) or isinstance(obj, _StubMeta)


def find_stub(obj, depth: int = 0):
    """The first stub object inside a (nested) value, or None."""
    if depth > 20:
        return None
    if is_stub(obj):
        return obj
    if isinstance(obj, (list, tuple, set)):
        for v in obj:
            hit = find_stub(v, depth + 1)
            if hit is not None:
                return hit
    elif isinstance(obj, dict):
        for v in obj.values():
            hit = find_stub(v, depth + 1)
            if hit is not None:
                return hit
    return None
