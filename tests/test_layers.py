"""The layout is the pipeline: lower stages never import higher ones.

Read from the source (every ``import`` statement, at any depth, type-checking
blocks included), so a lazy import inside a function counts as much as one at
the top of a file.
"""
from __future__ import annotations

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "dynacap"

#: stage -> the stages it must never import (by dotted prefix under ``dynacap``).
FORBIDDEN = {
    "values": ("interpreter", "codegen", "capture", "optimize", "explain", "export", "harness", "backends"),
    "models": ("interpreter", "codegen", "capture", "optimize", "explain", "export", "harness"),
    "graph": ("interpreter", "codegen", "capture", "optimize", "explain", "export", "harness"),
    "regions": ("interpreter", "values", "codegen", "capture", "graph"),
    "skipfiles": ("interpreter", "values", "codegen", "capture", "graph"),
    "source": ("interpreter", "values", "codegen", "capture", "graph"),
}


def _module(path: pathlib.Path) -> list[str]:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def _imports(source: str, package: list[str]):
    """``(line, dotted name)`` of every module (or package member) that ``source``, a file of the package
    ``package`` (dotted parts), imports from dynacap."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)] + ([node.module] if node.module else [])
            else:
                base = (node.module or "").split(".")
            if base[:1] != ["dynacap"]:
                continue
            for alias in node.names:
                yield node.lineno, ".".join(base + ([alias.name] if not node.module else []))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("dynacap."):
                    yield node.lineno, alias.name


def test_lower_stages_never_import_higher_ones():
    offences = []
    for stage, forbidden in FORBIDDEN.items():
        files = sorted((PACKAGE / stage).rglob("*.py")) if (PACKAGE / stage).is_dir() else [PACKAGE / f"{stage}.py"]
        assert files and all(f.exists() for f in files), stage
        for path in files:
            here = _module(path)
            package = here if path.name == "__init__.py" else here[:-1]
            for line, name in _imports(path.read_text(), package):
                target = name.split(".")[1:2]
                if target and target[0] in forbidden:
                    offences.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {name}")
    assert not offences, "\n".join(offences)


def test_the_checker_sees_lazy_and_relative_imports():
    source = "import os\ndef f():\n    from ..interpreter.tracer import Tracer\n    from .. import capture\n"
    found = [name for _, name in _imports(source, ["dynacap", "values"])]
    assert found == ["dynacap.interpreter.tracer", "dynacap.capture"]
