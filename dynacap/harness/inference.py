"""Instantiation and input inference: find constructor args and forward inputs.

Runs inside the case worker.  Starting from defaults and name/annotation
guesses (see :mod:`dynacap.harness.values`), it tries candidate constructor
arguments and candidate forward inputs (images ``[B,C,H,W]``, sequences
``[B,T,D]``, features ``[B,D]``, token ids), using the module's first layers
and the error messages of failed tries to steer the next candidates.  Search
is bounded by a number of tries and a time budget.  It returns *specs* so that
other processes rebuild identical values.  It must not compile anything, nor
decide statuses beyond "found / not found".
"""
from __future__ import annotations

import copy
import inspect
import json
import re
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import nn

from .shapes import _first_layer_hint, _refine_forward, forward_candidates
from .values import SmartConfig, _make_factory, build, build_kwargs, guess_value, to_spec



@dataclass
class Found:
    """Result of a successful search."""
    init_args: list
    init_kwargs: dict
    args: list
    kwargs: dict
    tries: int
    obj: Any = None           # the instantiated module or the function
    output: Any = None        # first output


@dataclass
class Failed(Exception):
    stage: str                # "init" | "forward"
    message: str
    tb: str
    tries: int
    attempts: list = field(default_factory=list)

    def __str__(self):
        return f"{self.stage}: {self.message}"


def seeded(seed: int) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def seed_all(seed: int) -> None:
    import random
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy as np
        np.random.seed(seed)
    except Exception:  # numpy absent or broken
        pass


def build_inputs(args_spec, kwargs_spec, seed: int):
    """Fresh forward inputs from specs; the same seed gives the same values."""
    return build(list(args_spec or []), seeded(seed)), build_kwargs(kwargs_spec, seeded(seed + 1))


def _fmt_exc(e: BaseException) -> str:
    return "".join(traceback.format_exception(type(e), e, e.__traceback__))[-6000:]


def _required(sig: inspect.Signature, skip_first: bool) -> list[inspect.Parameter]:
    params = list(sig.parameters.values())
    if skip_first and params:
        params = params[1:]
    return [p for p in params
            if p.default is inspect.Parameter.empty
            and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


# ---------------------------------------------------------------- constructor
def _init_signature(cls) -> inspect.Signature | None:
    try:
        return inspect.signature(cls.__init__)
    except (TypeError, ValueError):
        return None


def _line_names(e: BaseException, names: list[str]) -> list[str]:
    """Parameter names mentioned on the failing line of user code."""
    tb = traceback.extract_tb(e.__traceback__)
    for fr in reversed(tb):
        if "/torch/" in fr.filename or not fr.line:
            continue
        hits = [n for n in names if re.search(rf"\b{re.escape(n)}\b", fr.line)]
        if hits:
            return hits
    return []


def init_candidates(cls) -> tuple[list[inspect.Parameter], list[dict]]:
    sig = _init_signature(cls)
    if sig is None:
        return [], [{}]
    req = _required(sig, skip_first=True)
    if not req:
        return req, [{}]
    cands = []
    for base in (16, 64, 32, 8, 4, 2, 3, 1):
        cands.append({p.name: guess_value(p.name, p.annotation, base) for p in req})
    return req, cands


def _refine_init(assign: dict, e: BaseException) -> list[dict]:
    msg = str(e)
    names = list(assign)
    hit = _line_names(e, names)
    out = []
    if re.search(r"'int' object is not (iterable|subscriptable)|object of type 'int' has no len", msg):
        for n in hit or names:
            v = assign[n]
            if isinstance(v, int) and not isinstance(v, bool):
                new = dict(assign)
                new[n] = [v, v]
                out.append(new)
            elif not hit and isinstance(v, (list, tuple)) and v and all(
                    isinstance(x, int) and not isinstance(x, bool) for x in v):
                new = dict(assign)         # elements must be iterable too: nest
                new[n] = [list(v), list(v)]
                out.append(new)
    m = re.search(r"unsupported operand type\(s\) for .*?: '(list|tuple)' and|"
                  r"'(list|tuple)' object cannot be interpreted as an integer|"
                  r"must be .*?int.*?not (list|tuple)", msg)
    if m:
        for n in hit or names:
            v = assign[n]
            if isinstance(v, (list, tuple)) and v:
                new = dict(assign)
                new[n] = v[0] if not isinstance(v[0], (list, tuple)) else list(v[0])
                out.append(new)
    m = re.search(r"'(int|float|bool|str|list)' object has no attribute '(\w+)'", msg)
    if m:
        for n in hit or names:
            if not isinstance(assign[n], SmartConfig):
                new = dict(assign)
                new[n] = SmartConfig()
                out.append(new)
    if re.search(r"'(float|list|tuple)' object cannot be interpreted as an integer|"
                 r"must be int|expected int|integer", msg):
        for n in hit or names:
            v = assign[n]
            if isinstance(v, float):
                new = dict(assign)
                new[n] = max(1, int(v))
                out.append(new)
            elif isinstance(v, list) and v and isinstance(v[0], int):
                new = dict(assign)
                new[n] = v[0]
                out.append(new)
    if re.search(r"divisible|must be divis", msg):
        for n in hit or names:
            if isinstance(assign[n], int) and assign[n] > 1:
                new = dict(assign)
                new[n] = 1 if re.search(r"head", n) else assign[n] * 2
                out.append(new)
    if re.search(r"'(int|float|bool|str)' object is not callable", msg):
        for n in hit or names:
            if not callable(assign[n]):
                new = dict(assign)
                new[n] = _make_factory("norm" if "norm" in n else "act" if "act" in n else "identity")
                out.append(new)
    if re.search(r"zero-size parameters", msg):
        for n in names:
            v = assign[n]
            if isinstance(v, int) and not isinstance(v, bool) and 1 < v < 256:
                new = dict(assign)
                new[n] = v * 4
                out.append(new)
        if out:
            out = [{k: (v * 4 if isinstance(v, int) and not isinstance(v, bool) and 1 < v < 256 else v)
                    for k, v in assign.items()}] + out
    if re.search(r"'NoneType'|NoneType", msg) and hit:
        for n in hit:
            new = dict(assign)
            new[n] = SmartConfig() if not isinstance(assign[n], SmartConfig) else 16
            out.append(new)
    return out


def _key(x) -> str:
    return json.dumps(x, sort_keys=True, default=repr)


def _norm_msg(msg: str) -> str:
    return re.sub(r"\d+", "#", msg)[:200]


# ---------------------------------------------------------------- search
def search(target, kind: str, *, seed: int, init_args=None, init_kwargs=None,
           args=None, kwargs=None, max_tries: int = 60, budget_s: float = 30.0,
           call: Callable | None = None) -> Found:
    """Find a runnable (object, inputs) for ``target``; raises :class:`Failed`.

    Explicit specs are used as given (and not searched).  ``call(obj, args,
    kwargs)`` runs one eager forward (the worker passes a no-grad runner).
    """
    call = call or (lambda f, a, k: f(*a, **k))
    budget = _Budget(max_tries, budget_s)
    first_err: tuple[str, str, str] | None = None
    attempts: list = []

    # constructor candidates
    if kind == "module":
        if init_args is not None or init_kwargs is not None:
            req_names, init_cands = [], [None]
        else:
            req, cands = init_candidates(target)
            req_names = [p.name for p in req]
            init_cands = cands
    else:
        req_names, init_cands = [], [None]

    tried_init: set[str] = set()
    instances = 0
    queue = list(init_cands)
    while queue and not budget.exhausted() and instances < 4:
        assign = queue.pop(0)
        k = _key(to_spec(assign))
        if k in tried_init:
            continue
        tried_init.add(k)
        if kind == "module":
            if assign is None:
                i_args, i_kwargs = list(init_args or []), dict(init_kwargs or {})
                built_args, built_kwargs = build(i_args, seeded(seed)), build_kwargs(i_kwargs, seeded(seed))
            else:
                i_args, i_kwargs = [], {n: to_spec(assign[n]) for n in req_names}
                built_args, built_kwargs = [], copy.deepcopy(assign)
            seed_all(seed)
            budget.tries += 1
            try:
                obj = target(*built_args, **built_kwargs)
                if isinstance(obj, nn.Module):
                    obj.eval()
                    if assign is not None and any(p.numel() == 0 for p in obj.parameters()):
                        raise ValueError("constructor arguments gave zero-size parameters")
            except Exception as e:   # noqa: BLE001 - user code may raise anything
                if first_err is None:
                    first_err = ("init", f"{type(e).__name__}: {e}", _fmt_exc(e))
                attempts.append({"init": _key(to_spec(assign)), "error": f"{type(e).__name__}: {e}"[:300]})
                if assign is not None:
                    queue[:0] = [c for c in _refine_init(assign, e) if _key(to_spec(c)) not in tried_init]
                continue
            # SmartConfig may have grown during __init__; record what it handed out
            if assign is not None:
                i_kwargs = {n: to_spec(built_kwargs[n]) for n in req_names}
            instances += 1
            fn = obj
            fwd = getattr(obj, "forward", None)
        else:
            i_args, i_kwargs = [], {}
            obj = fn = target
            fwd = target
        try:
            found = _search_inputs(fn, fwd, obj, seed, args, kwargs, call, budget, attempts)
        except _InputsFailed as f:
            if first_err is None or first_err[0] == "init":
                first_err = f.first
            if args is not None or f.fatal:
                break
            continue
        return Found(i_args, i_kwargs, found[0], found[1], budget.tries, obj, found[2])
    if first_err is None:
        first_err = ("init", "no candidate constructor arguments left", "")
    raise Failed(first_err[0], first_err[1], first_err[2], budget.tries, attempts[-20:])


class _Budget:
    def __init__(self, max_tries: int, seconds: float):
        self.tries, self.max_tries = 0, max_tries
        self.deadline = time.monotonic() + seconds

    def exhausted(self) -> bool:
        return self.tries >= self.max_tries or time.monotonic() > self.deadline


class _InputsFailed(Exception):
    def __init__(self, first, fatal=False):
        super().__init__(first[1])
        self.first, self.fatal = first, fatal


def _search_inputs(fn, fwd, obj, seed, args, kwargs, call, budget, attempts):
    if args is not None or kwargs is not None:
        specs_list = [list(args or [])]
        kw = dict(kwargs or {})
    else:
        try:
            sig = inspect.signature(fwd)
        except (TypeError, ValueError):
            sig = None
        params = [p for p in (sig.parameters.values() if sig else [])
                  if p.default is inspect.Parameter.empty
                  and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if sig is None or any(p.kind == p.VAR_POSITIONAL for p in sig.parameters.values()) and not params:
            params = [inspect.Parameter("x", inspect.Parameter.POSITIONAL_ONLY)]
        hint = _first_layer_hint(obj) if isinstance(obj, nn.Module) else None
        specs_list = forward_candidates(params, hint)
        kw = {}
    tried: set[str] = set()
    local = 0
    first = None
    errs: dict[str, int] = {}
    queue = list(specs_list)
    while queue:
        if local and (budget.exhausted() or local >= 40):
            break
        specs = queue.pop(0)
        k = _key(specs)
        if k in tried:
            continue
        tried.add(k)
        local += 1
        budget.tries += 1
        seed_all(seed)
        a, kwv = build_inputs(specs, kw, seed)
        try:
            out = call(fn, a, kwv)
        except Exception as e:  # noqa: BLE001
            if first is None:
                first = ("forward", f"{type(e).__name__}: {e}", _fmt_exc(e))
            attempts.append({"args": k[:300], "error": f"{type(e).__name__}: {e}"[:300]})
            if args is not None or kwargs is not None:
                break
            new = [c for c in _refine_forward(specs, e) if _key(c) not in tried]
            queue[:0] = new
            nm = _norm_msg(str(e))
            errs[nm] = errs.get(nm, 0) + 1
            if errs[nm] >= 8 and not new:
                break       # the same error whatever the input: a bug, not a shape
            continue
        return specs, kw, out
    raise _InputsFailed(first or ("forward", "no candidate inputs left", ""),
                        fatal=args is not None or kwargs is not None)
