"""Discovery: find cases in project checkouts and manifests without importing them.

Runs in the harness process.  A PATH is a manifest (``*.jsonl``), a project
checkout, or a folder of checkouts.  In a project every ``.py`` file is parsed
with :mod:`ast` (never imported); classes deriving from ``torch.nn`` classes,
directly or through other classes of the same project, become module cases.
A project may also carry ``dynacap_cases.jsonl`` (same format as a manifest)
for explicit cases such as function entry points.  This module must not import
or execute project code.
"""
from __future__ import annotations

import ast
import json
import os
import random
import re
from dataclasses import dataclass, field

from .case import Case

PROJECT_MANIFEST = "dynacap_cases.jsonl"
SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", "node_modules", "venv", ".venv", "env",
             ".env", "build", "dist", "site-packages", ".tox", ".eggs", ".mypy_cache",
             ".pytest_cache", ".ipynb_checkpoints"}
SKIP_FILES = {"setup.py", "conftest.py", "noxfile.py", "fabfile.py"}
MAX_FILE_BYTES = 1_000_000
PROJECT_MARKERS = ("setup.py", "pyproject.toml", "setup.cfg", "requirements.txt", ".git",
                   PROJECT_MANIFEST, "src")
#: torch classes whose subclasses have a usable forward without defining one.
TORCH_PREFIXES = ("torch.nn.", "torch.jit.ScriptModule", "nn.")


@dataclass
class Discovery:
    cases: list[Case] = field(default_factory=list)
    projects: list[str] = field(default_factory=list)
    parse_errors: list[dict] = field(default_factory=list)
    manifest_errors: list[dict] = field(default_factory=list)

    def summary(self) -> dict:
        return {"cases": len(self.cases), "projects": len(self.projects),
                "parse_errors": self.parse_errors[:200], "manifest_errors": self.manifest_errors[:200]}


# ---------------------------------------------------------------- ast scanning
@dataclass
class ClassInfo:
    name: str
    file: str
    lineno: int
    bases: list[str]
    has_forward: bool


def _dotted(node) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else None
    if isinstance(node, ast.Subscript):        # Generic[...] and friends
        return _dotted(node.value)
    if isinstance(node, ast.Call):             # e.g. six.with_metaclass(...)
        return None
    return None


def _imports(tree: ast.Module) -> dict[str, str]:
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    names[a.asname] = a.name
                else:
                    names[a.name.split(".")[0]] = a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                names[a.asname or a.name] = f"{node.module}.{a.name}"
    return names


def _resolve(name: str, imports: dict[str, str]) -> str:
    head, _, rest = name.partition(".")
    if head in imports:
        full = imports[head]
        return f"{full}.{rest}" if rest else full
    return name


def scan_file(path: str, rel: str) -> list[ClassInfo]:
    with open(path, "rb") as f:
        src = f.read()
    tree = ast.parse(src, filename=rel)
    imports = _imports(tree)
    out = []
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        bases = []
        for b in node.bases:
            d = _dotted(b)
            if d:
                bases.append(_resolve(d, imports))
        has_fwd = any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "forward"
                      for n in node.body)
        out.append(ClassInfo(node.name, rel, node.lineno, bases, has_fwd))
    return out


def _is_torch_base(base: str) -> bool:
    return base.startswith(TORCH_PREFIXES) or base in ("Module", "torch.nn.Module")


def _torch_base_has_forward(base: str) -> bool:
    last = base.rsplit(".", 1)[-1]
    return last not in ("Module", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict",
                        "ScriptModule")


def python_files(root: str):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
        for fn in sorted(filenames):
            if fn.endswith(".py") and fn not in SKIP_FILES:
                full = os.path.join(dirpath, fn)
                try:
                    if os.path.getsize(full) > MAX_FILE_BYTES:
                        continue
                except OSError:
                    continue
                yield full, os.path.relpath(full, root)


def discover_project(root: str, project: str | None = None, result: Discovery | None = None) -> Discovery:
    root = os.path.abspath(root)
    project = project or os.path.basename(root.rstrip(os.sep))
    result = result or Discovery()
    result.projects.append(project)
    classes: list[ClassInfo] = []
    for full, rel in python_files(root):
        try:
            classes.extend(scan_file(full, rel))
        except (SyntaxError, ValueError, UnicodeDecodeError, RecursionError) as e:
            result.parse_errors.append({"project": project, "file": rel, "error": f"{type(e).__name__}: {e}"})
    by_name: dict[str, list[ClassInfo]] = {}
    for c in classes:
        by_name.setdefault(c.name, []).append(c)
    # fixed point over project classes: is it a module? does it have a forward?
    is_mod: dict[int, bool] = {}
    fwd: dict[int, bool] = {}
    for c in classes:
        tb = [b for b in c.bases if _is_torch_base(b)]
        is_mod[id(c)] = bool(tb)
        fwd[id(c)] = c.has_forward or any(_torch_base_has_forward(b) for b in tb)
    changed = True
    while changed:
        changed = False
        for c in classes:
            for b in c.bases:
                for parent in by_name.get(b.rsplit(".", 1)[-1], []):
                    if parent is c:
                        continue
                    if is_mod[id(parent)] and not is_mod[id(c)]:
                        is_mod[id(c)] = changed = True
                    if is_mod[id(parent)] and fwd[id(parent)] and not fwd[id(c)]:
                        fwd[id(c)] = changed = True
    for c in classes:
        if is_mod[id(c)] and fwd[id(c)]:
            result.cases.append(Case(id=f"{project}/{c.file}::{c.name}", project=project, root=root,
                                     qualname=c.name, kind="module", file=c.file,
                                     extra={"line": c.lineno}))
    pm = os.path.join(root, PROJECT_MANIFEST)
    if os.path.isfile(pm):
        explicit = load_manifest(pm, result, project=project, root=root)
        ids = {c.id for c in explicit}
        result.cases = [c for c in result.cases if c.id not in ids] + explicit
    return result


# ---------------------------------------------------------------- manifests
def _case_from_entry(d: dict, mdir: str, project: str | None, root: str | None, n: int) -> Case:
    qual = d.get("class") or d.get("function") or d.get("qualname")
    if not qual:
        raise ValueError("entry needs 'class' or 'function'")
    kind = "function" if d.get("function") else d.get("kind", "module")
    if not d.get("file") and not d.get("module"):
        raise ValueError("entry needs 'file' or 'module'")
    proj = d.get("project") or project or os.path.splitext(os.path.basename(mdir))[0]
    r = root or mdir
    if d.get("root"):
        r = os.path.normpath(os.path.join(mdir, d["root"]))
    where = d.get("file") or d.get("module")
    cid = d.get("id") or f"{proj}/{where}::{qual}"
    data = d.get("data")
    if data:
        data = os.path.normpath(os.path.join(mdir, data))
    return Case(id=cid, project=proj, root=os.path.abspath(r), qualname=qual, kind=kind,
                file=d.get("file"), module=d.get("module"), init_args=d.get("init_args"),
                init_kwargs=d.get("init_kwargs"), args=d.get("args"), kwargs=d.get("kwargs"),
                data=data, timeout=d.get("timeout"), source="manifest", expect=d.get("expect"),
                extra={"line": n})


def load_manifest(path: str, result: Discovery, project: str | None = None,
                  root: str | None = None) -> list[Case]:
    mdir = os.path.dirname(os.path.abspath(path))
    out: list[Case] = []
    seen: dict[str, int] = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            try:
                d = json.loads(line)
                c = _case_from_entry(d, mdir, project, root, n)
            except (ValueError, TypeError) as e:
                result.manifest_errors.append({"manifest": path, "line": n, "error": str(e)})
                continue
            if c.id in seen:
                seen[c.id] += 1
                c.id = f"{c.id}#{seen[c.id]}"
            else:
                seen[c.id] = 0
            out.append(c)
    return out


def is_project(path: str) -> bool:
    if any(os.path.exists(os.path.join(path, m)) for m in PROJECT_MARKERS):
        return True
    try:
        return any(fn.endswith(".py") for fn in os.listdir(path))
    except OSError:
        return False


#: functions through which code asks whether a compiler is tracing it
COMPILING_CHECKS = re.compile(r"\bis_(?:compiling|dynamo_compiling|torchdynamo_compiling)\b")


def _mark_compiler_checks(cases: list[Case]) -> None:
    """``extra["checks_compiling"]`` for cases whose file asks ``is_compiling()``: such code
    runs something else under a compiler that answers True (Dynamo does)."""
    memo: dict[str, bool] = {}
    for c in cases:
        if not c.file:
            continue
        path = os.path.join(c.root, c.file)
        if path not in memo:
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    memo[path] = bool(COMPILING_CHECKS.search(f.read(MAX_FILE_BYTES)))
            except OSError:
                memo[path] = False
        if memo[path]:
            c.extra["checks_compiling"] = True


def discover(paths: list[str]) -> Discovery:
    """Cases of every PATH: manifest, project checkout, or folder of checkouts."""
    result = Discovery()
    for p in paths:
        if os.path.isfile(p) and p.endswith(".jsonl"):
            cases = load_manifest(p, result)
            result.cases.extend(cases)
            for proj in sorted({c.project for c in cases}):
                if proj not in result.projects:
                    result.projects.append(proj)
        elif os.path.isdir(p):
            if is_project(p):
                discover_project(p, result=result)
            else:
                for name in sorted(os.listdir(p)):
                    sub = os.path.join(p, name)
                    if os.path.isdir(sub) and not name.startswith(".") and name not in SKIP_DIRS:
                        discover_project(sub, result=result)
        else:
            result.manifest_errors.append({"manifest": p, "line": 0, "error": "not a .jsonl file or a folder"})
    _mark_compiler_checks(result.cases)
    seen: set[str] = set()
    uniq = []
    for c in result.cases:
        if c.id not in seen:
            seen.add(c.id)
            uniq.append(c)
    result.cases = uniq
    return result


def sample(cases: list[Case], n: int | None, seed: int) -> list[Case]:
    if not n or n >= len(cases):
        return list(cases)
    ordered = sorted(cases, key=lambda c: c.id)
    picked = random.Random(seed).sample(ordered, n)
    return sorted(picked, key=lambda c: c.id)
