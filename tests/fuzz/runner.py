"""Run one fuzz program under one engine and record everything it did, call by call.

``run_program(source, seed, engine)`` execs the source into a fresh module
dict (so every engine run starts from the same globals), wraps its ``fn``
with the engine, calls it ``inputs.CALLS`` times with the arguments of
``inputs.make_args`` and returns a ``Run``: per call an ``Observation`` (a
snapshot of the result, the arguments after the call, the module's ``G_*``
globals and its classes' constant attributes, printed text, the exception),
plus the internal-error warnings the engine emitted and what it compiled
(graphs, graph breaks and their reasons, from ``Engine.counts``).  Snapshots copy tensors and containers and replace a second
reference to the same tensor/list/dict/object by an ``("<alias>", path)``
marker, so lost aliasing shows up as a difference.  It compares nothing
(see ``classify``).
"""
from __future__ import annotations

import builtins
import collections
import contextlib
import io
import linecache
import os
import traceback
import warnings
from dataclasses import dataclass, field

import torch

from .grammar import ENTRY
from .inputs import CALLS, Obj, make_args


def program_filename(seed) -> str:
    """A file name for the program's code objects (never written; registered in ``linecache``)."""
    return os.path.join(os.sep, "fuzz", f"program_{seed}.py")


@dataclass
class Observation:
    """One call: ``result``/``args``/``globals`` are snapshots; ``exception`` is ``(type, message)``."""

    result: object = None
    exception: tuple[str, str] | None = None
    #: The exception was raised inside the engine's own code (not the program's).
    engine_raised: bool = False
    where: str = ""  # the deepest frame of the exception, "file:line in function"
    args: object = None
    globals: object = None
    stdout: str = ""


@dataclass
class Run:
    engine: str
    calls: list[Observation] = field(default_factory=list)
    internal_warnings: list[str] = field(default_factory=list)
    #: Graphs compiled and graph breaks met over all calls (None: the engine does not count, eager).
    graphs: int | None = None
    breaks: int | None = None
    break_reasons: list[str] = field(default_factory=list)


def snapshot(value, memo: dict, path: str):
    """A copy of ``value`` made of tensors, plain containers and constants (see the module doc).

    Containers of other types keep their type's name (``OrderedDict``, ``Counter``, a namedtuple, a
    ``tuple``/``dict`` subclass of the program, ``deque``), objects of the program's classes their
    ``__dict__`` or ``__slots__``.
    """
    program_object = type(value).__module__ == "fuzz_program" and (
        hasattr(value, "__dict__") or hasattr(type(value), "__slots__"))
    mutable = (torch.Tensor, list, dict, Obj, io.StringIO, set, collections.deque)
    if isinstance(value, mutable) or program_object:
        if id(value) in memo:
            return ("<alias>", memo[id(value)][0])
        # The value is kept with its path: a temporary (the dict of an object's slots) freed before the walk
        # ends would give its id to a later one, read as an alias of it.
        memo[id(value)] = (path, value)
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, list):
        return [snapshot(v, memo, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, tuple):
        items = tuple(snapshot(v, memo, f"{path}[{i}]") for i, v in enumerate(value))
        return type(value)(items) if type(value) in (tuple, torch.Size) else (f"<{type(value).__name__}>", items)
    if isinstance(value, dict):
        # Keys of the program's classes compare by their text: each run has classes of its own.
        items = {(("<key>", repr(k)) if type(k).__module__ == "fuzz_program" else k): snapshot(v, memo, f"{path}[{k!r}]")
                 for k, v in value.items()}
        return items if type(value) is dict else (f"<{type(value).__name__}>", items)
    if isinstance(value, collections.deque):
        return ("<deque>", value.maxlen, [snapshot(v, memo, f"{path}[{i}]") for i, v in enumerate(value)])
    if isinstance(value, Obj) or program_object:
        if not hasattr(value, "__dict__"):
            slots = {n: getattr(value, n) for n in type(value).__slots__ if hasattr(value, n)}
            return {f"<{type(value).__name__}>": snapshot(slots, memo, f"{path}.__slots__")}
        return {f"<{type(value).__name__}>": snapshot(dict(vars(value)), memo, f"{path}.__dict__")}
    if isinstance(value, io.StringIO):
        return ("<StringIO>", value.getvalue())
    if isinstance(value, (set, frozenset)):
        return (f"<{type(value).__name__}>", sorted(map(repr, value)))
    if value is None or isinstance(value, (bool, int, float, str, torch.dtype, torch.device)):
        return value
    return ("<object>", type(value).__name__)


def load_module(source: str, filename: str) -> dict:
    module = {"__name__": "fuzz_program", "__file__": filename, "__builtins__": builtins}
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec", dont_inherit=True), module)  # not this file's __future__ imports
    return module


def _origin(exc: BaseException, program_file: str, internal_dirs) -> tuple[bool, str]:
    """(raised inside the engine, "file:line in name") from the deepest program-or-engine frame."""
    deepest, engine = None, False
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == program_file:
            deepest, engine = frame, False
        elif internal_dirs and os.path.abspath(frame.filename).startswith(internal_dirs):
            deepest, engine = frame, True
    where = f"{os.path.basename(deepest.filename)}:{deepest.lineno} in {deepest.name}" if deepest else ""
    return engine, where


def run_program(source: str, seed: int, engine, calls=range(CALLS), exclude=()) -> Run:
    """Run the program under ``engine`` (see ``engines``) and observe each call in ``calls``.

    ``exclude``: the grammar exclusions the program was written with (``"bool_k"`` changes the inputs).
    """
    filename = program_filename(seed)
    run = Run(engine.name)
    engine.reset()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            module = load_module(source, filename)
            fn = engine.wrap(module[ENTRY])
            for call in calls:
                args = make_args(seed, call, bool_k="bool_k" not in exclude)
                run.calls.append(_call(fn, args, module, filename, engine))
            counted = engine.counts()
            if counted is not None:
                run.graphs, run.breaks, run.break_reasons = counted
        marker = engine.internal_warning
        run.internal_warnings = [str(w.message) for w in caught if marker and marker in str(w.message)]
    finally:
        engine.reset()
    return run


def _call(fn, args: dict, module: dict, filename: str, engine) -> Observation:
    obs = Observation()
    out = io.StringIO()
    result = None
    with contextlib.redirect_stdout(out):
        try:
            result = fn(**args)
        except Exception as e:  # compared with the eager run's
            obs.exception = (type(e).__name__, str(e))
            obs.engine_raised, obs.where = _origin(e, filename, engine.internal_dirs)
    memo: dict = {}
    obs.args = snapshot(args, memo, "args")
    state = {n: v for n, v in module.items() if n.startswith("G_")}
    for n, cls in module.items():  # class attributes a program may assign (``Acc.scale = 4``)
        if isinstance(cls, type) and cls.__module__ == "fuzz_program":
            state[f"<class {n}>"] = {a: v for a, v in vars(cls).items()
                                     if not a.startswith("__") and isinstance(v, (bool, int, float, str))}
    obs.globals = snapshot(state, memo, "globals")
    obs.result = snapshot(result, memo, "result")
    obs.stdout = out.getvalue()
    return obs
