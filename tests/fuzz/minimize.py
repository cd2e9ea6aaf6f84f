"""Shrink a failing fuzz program while the same class of failure reproduces.

``minimize(source, still_fails)`` is greedy: it tries smaller variants of the
program in this order and keeps the first that still fails, until none does
(or the check budget is spent):

1. delete one statement (anywhere; an emptied block gets ``pass``);
2. replace a compound statement (``if``/``for``/``while``/``with``/``try``)
   by one of its bodies;
3. replace an expression by one of its operands (``a + b`` -> ``a``,
   ``torch.sin(e)`` -> ``e``, ``t.relu()`` -> ``t``, ``c if p else d`` -> ``c``),
   drop elements of tuples/lists/dicts, a condition by ``True``/``False``;
4. inline a name bound once to a constant or a name (``n = 2`` then ``n``).

A variant must have fewer AST nodes, so the loop ends.  ``still_fails`` is
the oracle (``oracle_for`` builds the usual one: eager vs an engine, same
class, in this process with a time limit for the eager run; crashes and
timeouts go through ``batch`` children).  Calls are minimized too
(``minimize_calls``): a failure on call 2 may need only call 2.
"""
from __future__ import annotations

import ast
import copy
import signal
import time

STATEMENT_FIELDS = ("body", "orelse", "finalbody")


def _size(tree: ast.AST) -> int:
    return sum(1 for _ in ast.walk(tree))


def _statement_lists(tree: ast.AST):
    """(owner, field) of every statement list, in a fixed order."""
    for node in ast.walk(tree):
        for name in STATEMENT_FIELDS:
            body = getattr(node, name, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                yield node, name


def _deletions(tree):
    for li, (owner, name) in enumerate(list(_statement_lists(tree))):
        for i in range(len(getattr(owner, name)) - 1, -1, -1):
            def apply(t, li=li, i=i):
                o, n = list(_statement_lists(t))[li]
                body = getattr(o, n)
                del body[i]
                if not body and not isinstance(o, ast.Module):
                    if n == "body":
                        body.append(ast.Pass())
                    else:
                        setattr(o, n, [])
            yield apply


def _unwraps(tree):
    compound = (ast.If, ast.For, ast.While, ast.With, ast.Try)
    for li, (owner, name) in enumerate(list(_statement_lists(tree))):
        for i, stmt in enumerate(getattr(owner, name)):
            if not isinstance(stmt, compound):
                continue
            parts = ["body", "orelse", "finalbody"] + [f"handler{h}" for h in range(len(getattr(stmt, "handlers", [])))]
            for part in parts:
                def apply(t, li=li, i=i, part=part):
                    o, n = list(_statement_lists(t))[li]
                    body = getattr(o, n)
                    s = body[i]
                    new = s.handlers[int(part[7:])].body if part.startswith("handler") else getattr(s, part, [])
                    if not new:
                        raise ValueError("empty part")
                    body[i:i + 1] = new
                yield apply


def _operands(node: ast.expr) -> list:
    """Smaller expressions that could stand for ``node``."""
    if isinstance(node, ast.BinOp):
        return [node.left, node.right]
    if isinstance(node, ast.UnaryOp):
        return [node.operand]
    if isinstance(node, ast.IfExp):
        return [node.body, node.orelse]
    if isinstance(node, ast.BoolOp):
        return list(node.values)
    if isinstance(node, ast.Call):
        out = [a for a in node.args if not isinstance(a, ast.Starred)]
        if isinstance(node.func, ast.Attribute):
            out.append(node.func.value)
        return out
    if isinstance(node, ast.Compare):
        return [ast.Constant(True), ast.Constant(False)]
    if isinstance(node, ast.Subscript):
        return [node.value]
    return []


def _expression_slots(tree):
    """(parent, field, index) of every expression, in a fixed order (index None: not a list)."""
    def loaded(v):
        return isinstance(v, ast.expr) and not isinstance(getattr(v, "ctx", None), (ast.Store, ast.Del))

    for parent in ast.walk(tree):
        for name, value in ast.iter_fields(parent):
            if loaded(value):
                yield parent, name, None
            elif isinstance(value, list):
                for i, v in enumerate(value):
                    if loaded(v):
                        yield parent, name, i


def _get(parent, name, index):
    value = getattr(parent, name)
    return value if index is None else value[index]


def _set(parent, name, index, new):
    if index is None:
        setattr(parent, name, new)
    else:
        getattr(parent, name)[index] = new


def _simplifications(tree):
    slots = list(_expression_slots(tree))
    for si, (parent, name, index) in enumerate(slots):
        node = _get(parent, name, index)
        for oi in range(len(_operands(node))):
            def apply(t, si=si, oi=oi):
                p, n, i = list(_expression_slots(t))[si]
                _set(p, n, i, copy.deepcopy(_operands(_get(p, n, i))[oi]))
            yield apply
        if isinstance(node, (ast.Tuple, ast.List)) and len(node.elts) > 1 and not isinstance(node.ctx, ast.Store):
            for ei in range(len(node.elts)):
                def apply(t, si=si, ei=ei):
                    p, n, i = list(_expression_slots(t))[si]
                    del _get(p, n, i).elts[ei]
                yield apply
        if isinstance(node, ast.Dict) and len(node.keys) > 1:
            for ei in range(len(node.keys)):
                def apply(t, si=si, ei=ei):
                    p, n, i = list(_expression_slots(t))[si]
                    d = _get(p, n, i)
                    del d.keys[ei], d.values[ei]
                yield apply


def _inlinings(tree):
    """``n = <constant or name>`` bound once in a function: use the value instead of ``n``."""
    for fi, func in enumerate(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        stores: dict = {}
        for node in ast.walk(func):
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                stores[node.id] = stores.get(node.id, 0) + 1
        for stmt in func.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                    and isinstance(stmt.value, (ast.Constant, ast.Name)) and stores.get(stmt.targets[0].id) == 1:
                target = stmt.targets[0].id

                def apply(t, fi=fi, target=target):
                    f = [n for n in ast.walk(t) if isinstance(n, ast.FunctionDef)][fi]
                    assign = next(s for s in f.body if isinstance(s, ast.Assign)
                                  and isinstance(s.targets[0], ast.Name) and s.targets[0].id == target)
                    f.body.remove(assign)
                    for node in ast.walk(f):
                        for name, value in ast.iter_fields(node):
                            items = value if isinstance(value, list) else [value]
                            for i, v in enumerate(items):
                                if isinstance(v, ast.Name) and v.id == target and isinstance(v.ctx, ast.Load):
                                    _set(node, name, i if isinstance(value, list) else None,
                                         copy.deepcopy(assign.value))
                yield apply


PASSES = (_deletions, _unwraps, _simplifications, _inlinings)


def variants(source: str):
    """Smaller programs derived from ``source`` (valid syntax, fewer AST nodes), best first."""
    tree = ast.parse(source)
    size = _size(tree)
    for make in PASSES:
        for apply in make(tree):
            new = copy.deepcopy(tree)
            try:
                apply(new)
                text = ast.unparse(ast.fix_missing_locations(new))
                if _size(ast.parse(text)) < size:
                    yield text
            except (ValueError, SyntaxError, IndexError, StopIteration, AttributeError, TypeError):
                continue


def minimize(source: str, still_fails, *, max_checks: int = 400, max_seconds: float = 300.0) -> str:
    """The smallest variant found that ``still_fails`` (``source`` itself is assumed to fail)."""
    current = ast.unparse(ast.parse(source))
    rejected: set[str] = set()
    checks, start = 0, time.monotonic()
    improved = True
    while improved and checks < max_checks and time.monotonic() - start < max_seconds:
        improved = False
        for candidate in variants(current):
            if candidate in rejected:
                continue
            if checks >= max_checks or time.monotonic() - start >= max_seconds:
                break
            checks += 1
            if still_fails(candidate):
                current, improved = candidate, True
                break
            rejected.add(candidate)
    return current


def minimize_calls(calls: list[int], failing_call: int | None, still_fails) -> list[int]:
    """The fewest calls (a prefix, or the failing call alone) that still fail."""
    if failing_call is None:
        return calls
    for option in ([failing_call], calls[: calls.index(failing_call) + 1] if failing_call in calls else calls):
        if still_fails(option):
            return option
    return calls


class _Timeout(BaseException):
    """Raised by the alarm in a check (a BaseException, so the runner's ``except Exception`` lets it pass)."""


def _with_alarm(seconds: float, fn):
    def ring(signum, frame):
        raise _Timeout()

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def oracle_for(seed: int, engine_spec, cls: str, *, exclude=(), eager_seconds: float = 5.0,
               batch_timeout_s: float = 20.0):
    """``still_fails(source, calls)``: the program, run on the inputs of ``seed``, fails with ``cls``.

    ``engine_spec``: an engine name (see ``engines.make_engine``) or an engine
    object.  Crash and timeout classes run each check in a child process.
    """
    from .classify import classify
    from .engines import Engine, make_engine
    from .runner import run_program

    if cls in ("crash", "timeout"):
        from .batch import Item, run_batch

        def still_fails(source: str, calls) -> bool:
            results = run_batch([Item(seed, [engine_spec], source, list(calls))], exclude=exclude,
                                timeout_s=batch_timeout_s)
            return bool(results) and results[0].cls == cls
        return still_fails

    engine = make_engine(engine_spec) if isinstance(engine_spec, str) else engine_spec

    def still_fails(source: str, calls) -> bool:
        try:
            compile(source, "<candidate>", "exec")
            eager = _with_alarm(eager_seconds, lambda: run_program(source, seed, Engine(), calls, exclude))
            return classify(eager, run_program(source, seed, engine, calls, exclude)).cls == cls
        except (_Timeout, Exception):  # an invalid variant (the module does not even load) does not count
            return False
    return still_fails


def minimize_failure(source: str, seed: int, engine_spec, cls: str, failing_call: int | None, *, exclude=(),
                     max_checks: int = 400, max_seconds: float = 300.0) -> tuple[str, list[int]]:
    """(minimized source, calls needed) for a program that fails with ``cls`` under the engine."""
    from .inputs import CALLS

    still_fails = oracle_for(seed, engine_spec, cls, exclude=exclude)
    calls = minimize_calls(list(range(CALLS)), failing_call, lambda c: still_fails(source, c))
    small = minimize(source, lambda s: still_fails(s, calls), max_checks=max_checks, max_seconds=max_seconds)
    return small, calls
