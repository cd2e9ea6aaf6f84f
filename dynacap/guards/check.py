"""Compile a ``GuardSet`` into the check the hook calls as ``check(L, G) -> bool``.

By default that is a C guard program (``_C.GuardProgram``, lowered by
``program.py``): no Python bytecode runs for the guards it knows, and the
others run in one generated Python function it calls last.  With the
environment variable ``DYNACAP_PYTHON_GUARDS=1`` (for debugging) the check
is the generated Python function of every guard: a single ``and`` chain
generated as source and ``exec``-ed.  The readable guard list and a slow
``failing`` explanation (for the ``recompiles`` log) come with either.
Nothing here decides *what* to guard.
"""
from __future__ import annotations

import builtins as _builtins
import os
import re

import torch

from .._C import GuardProgram
from .program import Lowered, lower
from .guard import COMPLEX_BITS, FLOAT_BITS, SHAPE, STRIDE, VARIABLE, Guard, GuardSet, WeakGuarded, same_constant


class CompiledGuard:
    """A cache entry's guard: ``fn`` is what the hook calls as ``fn(L, G)``.

    ``fn`` is the C program (``program`` lists its checks; ``python_fn``, the
    generated Python check of the same guards, is compiled when first asked for)
    or, with ``DYNACAP_PYTHON_GUARDS=1``, ``python_fn`` itself.  ``source`` is
    ``python_fn``'s source; next to a C program it is generated when first asked
    for (logs, ``explain``, tests): on a large model that text costs more than
    the C program.  Generating it later gives the same text: it depends only on
    ``guards`` (a list nobody changes once compiled) and ``builtins_dict``, which
    the scope holds by reference either way.
    """

    def __init__(self, guards: list[Guard], fn, source: str | None, lowered: Lowered | None = None,
                 builtins_dict: dict | None = None):
        self.guards = guards
        self.fn = fn
        self._source = source
        self._lowered = lowered
        self._program = None
        self._builtins = builtins_dict
        self._python_fn = fn if lowered is None else None
        fn.compiled_guard = self  # the hook holds ``fn``; logs find the readable guards through it

    @property
    def program(self) -> list[str] | None:
        """The C program's checks, one readable line each, then the guards left to Python (None: no program)."""
        if self._program is None and self._lowered is not None:
            self._program = self._lowered.lines() + [f"python: {g.description}" for g in self._lowered.python]
        return self._program

    @property
    def source(self) -> str:
        if self._source is None:
            self._source = _python_check(self.guards, self._builtins)[0]
        return self._source

    @property
    def python_fn(self):
        if self._python_fn is None:
            self._source, scope = _python_check(self.guards, self._builtins)
            self._python_fn = _compile(self._source, scope)
        return self._python_fn

    def __call__(self, L, G) -> bool:
        return self.fn(L, G)

    def failing(self, L, G) -> tuple[Guard, str] | None:
        """The first guard that fails for these locals/globals and a description of how, or None."""
        for g in self.guards:
            scope = _scope(g.constants, G)
            try:
                ok = eval(g.expr, scope, {"L": L, "G": G})
            except Exception as e:  # a missing local or attribute is a failure, not an error
                return g, f"{g.description} (raised {type(e).__name__}: {e})"
            if not ok:
                return g, f"{g.description}{_detail(g, scope, {'L': L, 'G': G})}"
        return None

    def describe(self) -> list[str]:
        return [str(g) for g in self.guards]

    def weakly_guarded(self) -> list:
        """The objects the guards hold weakly (``WeakGuarded``) that are still alive."""
        refs = [obj for g in self.guards for obj in g.objects.values() if isinstance(obj, WeakGuarded)]
        return [o for o in (r() for r in refs) if o is not None]


#: What a symbolic-shape guard reads: ``L['x'].size()[0]``, ``L['n']``.
_SHAPE_READ = re.compile(r"(?:\b[LG]|___g_\w+)\[[^\]]+\](?:\.\w+\b(?!\()|\[[^\]]*\])*(?:\.(?:size|stride)\(\)\[\d+\])?")


def _detail(g: Guard, scope: dict, frame: dict) -> str:
    """What the failing guard saw, for messages: `` (size (9, 4) != (8, 4))``, `` (got 3)``."""
    try:
        if g.kind == "TENSOR_MATCH":
            spec = next(iter(g.constants.values()))
            return f" ({spec.mismatch(eval(g.source.expr(), scope, frame))})"
        if g.kind == "EQUALS_MATCH" and g.source is not None:
            return f" (got {eval(g.source.expr(), scope, frame)!r})"
        if g.kind == "SYMBOLIC_SHAPE":
            reads = dict.fromkeys(_SHAPE_READ.findall(g.expr))
            return " (" + ", ".join(f"{r} = {eval(r, scope, frame)!r}" for r in reads) + ")"
    except Exception:
        pass
    return ""


def _scope(constants: dict, G) -> dict:
    scope = {
        "___grad_enabled": torch.is_grad_enabled,
        "___default_dtype": torch.get_default_dtype,
        "___any_autocast": torch._C._is_any_autocast_enabled,
        "B": _builtins.__dict__,
        "___float_bits": FLOAT_BITS,
        "___complex_bits": COMPLEX_BITS,
        "___same_constant": same_constant,
        "len": len,
        "type": type,
    }
    scope.update(constants)
    return scope


def compile_guards(guard_set: GuardSet, builtins_dict: dict | None = None, *, python: bool | None = None) -> CompiledGuard:
    """The check of ``guard_set``: a C program unless ``python`` (default: ``DYNACAP_PYTHON_GUARDS=1``)."""
    guards = list(guard_set)
    if python is None:
        python = os.environ.get("DYNACAP_PYTHON_GUARDS", "") not in ("", "0")
    if python:
        source, scope = _python_check(guards, builtins_dict)
        return CompiledGuard(guards, _compile(source, scope), source)
    lowered = lower(guards, builtins_dict)
    fallback = _compile(*_python_check(lowered.python, builtins_dict)) if lowered.python else None
    program = GuardProgram(tuple(lowered.steps), tuple(lowered.checks), fallback)
    return CompiledGuard(guards, program, None, lowered, builtins_dict)


def _python_check(guards: list[Guard], builtins_dict: dict | None) -> tuple[str, dict]:
    """The source of one function ``___guard(L, G)``, the ``and`` of ``guards``, and the scope it runs in."""
    scope = _scope({}, None)
    if builtins_dict is not None:
        scope["B"] = builtins_dict
    for g in guards:
        scope.update(g.constants)
    body = " and ".join(f"({e})" for e in _share_prefixes(guards)) or "True"
    source = f"def ___guard(L, G):\n    try:\n        return {body}\n    except Exception:\n        return False\n"
    return source, scope


def _compile(source: str, scope: dict):
    namespace: dict = {}
    exec(compile(source, "<dynacap guard>", "exec"), scope, namespace)
    return namespace["___guard"]


def _share_prefixes(guards: list[Guard]) -> list[str]:
    """The guard expressions, with each identity- or type-checked source read once.

    ``L['self']._modules['a']`` is checked by identity before
    ``L['self']._modules['a']._parameters['w']``; the first check stores the
    object in a local (``:=``) and later expressions start from it instead
    of walking the chain from the root again.  Guards run in order, so a
    local is always assigned before it is used.
    """
    known: list[tuple[str, str]] = []  # (source expression, local), longest first
    bound: list[tuple[str, str]] = []  # (``L['x'].size()``, the local holding it)
    tensors: list[tuple[str, str]] = []  # (a tensor's source as the guards read it, the local holding it)
    out = []
    for g in guards:
        expr = g.expr
        if g.kind == "SYMBOLIC_SHAPE":
            for read, name in bound:
                expr = expr.replace(read + "[", name + "[")
        for prefix, var in known:
            expr = _reuse(expr, prefix, var)
        if g.kind == "TENSOR_ALIASING":
            for reduced, name in tensors:
                expr = expr.replace(f"id({reduced})", f"id({name})")
        if g.kind == "TENSOR_MATCH":
            # Symbolic-shape and aliasing guards (evaluated after every tensor check) read the
            # tensors, sizes and strides the tensor checks bound.
            for name, obj in g.constants.items():
                if obj is SHAPE or obj is STRIDE:
                    read = f"{g.source.expr()}.{'size' if obj is SHAPE else 'stride'}()"
                    bound.append((read, name))
                elif obj is VARIABLE:
                    reduced = g.source.expr()
                    for prefix, var in known:
                        reduced = _reuse(reduced, prefix, var)
                    tensors.append((reduced, name))
        if g.source is not None and g.kind in ("ID_MATCH", "TYPE_MATCH"):
            src = g.source.expr()
            reduced = src
            for prefix, var in known:
                reduced = _reuse(reduced, prefix, var)
            var = f"___s{len(known)}"
            if g.kind == "ID_MATCH" and expr.startswith(reduced + " is "):
                expr = f"({var} := {reduced}) is " + expr[len(reduced) + 4:]
            elif g.kind == "TYPE_MATCH" and expr.startswith(f"type({reduced}) is "):
                expr = f"type({var} := {reduced}) is " + expr[len(f"type({reduced}) is "):]
            else:
                out.append(expr)
                continue
            known.append((src, var))
            known.sort(key=lambda kv: -len(kv[0]))
        out.append(expr)
    return out


def _reuse(expr: str, prefix: str, var: str) -> str:
    """``expr`` reading ``var`` where it read ``prefix`` (an attribute, item or ``len()`` of it, or itself)."""
    if prefix not in expr:
        return expr
    for after in (".", "[", ")"):
        expr = expr.replace(prefix + after, var + after)
    return expr
