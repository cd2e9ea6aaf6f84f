"""Fuzz productions for exceptions and context managers (issue 8 item 4), raised by Python, not tensors.

``try``/``except``/``else``/``finally`` around Python that raises while it
runs (``int("zz")``, a missing key, ``next`` of an empty iterator, a user
``raise``, a failed ``assert``, an attribute that is not there), often only
for some inputs (the condition reads ``k`` or a size), with handlers that
change tensors and state (``obj``, ``G_LIST``, the printed text);
exceptions raised in a helper and caught by a base class in the caller,
re-raised, chained (``raise ... from``) or let out of the function (the
exception itself is then compared); ``with`` on a user context manager that
logs and may swallow the exception, on ``contextlib.contextmanager``
generators, ``suppress``, ``nullcontext`` and ``ExitStack``; generators driven by ``send``/``close``/
``throw`` (``generator_protocol``); errors that depend on the call (unpacking a tensor or ``xs``,
``ZeroDivisionError`` on ``k``), chained exceptions read back, ``except*`` (``python_error_kinds``).
The module-level helpers are written on first use (``productions_objects.define``).
Registered by importing this module (``productions`` does).
"""
from __future__ import annotations

from .grammar import statement

HELPERS = {
    "errors": '''
class FuzzError(Exception):
    def __init__(self, msg, code=0):
        super().__init__(msg)
        self.code = code


class FuzzSubError(FuzzError):
    pass


def check_positive(t, n):
    if n <= 0:
        raise FuzzSubError("not positive: " + str(n), code=n)
    return t * n
''',
    "coroutines": '''
def running(t, log):
    total = t * 0
    n = 0
    while True:
        v = yield total
        if v is None:
            log.append(n)
            return n
        total = total + v
        n += 1


def guarded(log):
    try:
        while True:
            yield len(log)
    finally:
        log.append("closed")
''',
    "tracker": '''
import contextlib


class Tracker:
    def __init__(self, log, swallow=False):
        self.log = log
        self.swallow = swallow

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, kind, value, tb):
        self.log.append("exit" if kind is None else kind.__name__)
        return self.swallow


@contextlib.contextmanager
def scoped(log, t):
    log.append(1)
    try:
        yield t * 2
    finally:
        log.append(2)
''',
}


def define(w, name: str) -> None:
    if name not in w.module_helpers:
        w.module_helpers[name] = name
        w.module_lines += HELPERS[name].strip("\n").splitlines() + ["", ""]


def raiser(w, scope) -> tuple[str, str]:
    """(a statement that may raise, the exception it raises), often only for some inputs."""
    cond = w.condition(scope, tensor_ok=False)
    table = [
        ('n_ = int("zz")', "ValueError"),
        ('n_ = int(str(k)) if isinstance(k, int) else float("x1")', "ValueError") if "k" in scope.names
        else ('n_ = float("x1")', "ValueError"),
        ('n_ = d["missing"]' if "d" in scope.names else 'n_ = {}["missing"]', "KeyError"),
        ("n_ = next(iter([]))", "StopIteration"),
        (f"n_ = [1, 2][{w.rng.choice(['2', '-3', '1'])}]", "IndexError"),
        (f"n_ = 1 / ({w.num(scope, 1)} * 0)", "ZeroDivisionError"),
        ("n_ = obj.missing_attr" if "obj" in scope.names else "n_ = object().x", "AttributeError"),
        ("n_, m_ = [1, 2, 3]", "ValueError"),
        (f"assert {cond}, 'assertion ' + str({w.num(scope, 1)})", "AssertionError"),
        (f"if {cond}:\n    raise FuzzError('user', {w.num(scope, 1)})", "FuzzError"),
        (f"n_ = check_positive(x, {w.num(scope, 1)})" if "x" in scope.names else "n_ = 0", "FuzzSubError"),
        (f"if {cond}:\n    raise KeyError({w.num(scope, 1)})", "KeyError"),
    ]
    text, exc = w.rng.choice(table)
    if "Fuzz" in exc:
        define(w, "errors")
    return text, exc


def _lines(text: str) -> list[str]:
    return text.split("\n")


@statement("try_python_error", 4)
def try_python_error(w, scope, depth):
    """``try`` around Python that raises; the handler changes a tensor and state; ``else``/``finally``."""
    tensors = scope.of("tensor")
    if not tensors or depth >= w.MAX_DEPTH:
        return None
    t, e = w.fresh("t"), w.fresh("err")
    text, exc = raiser(w, scope)
    caught = w.rng.choice([exc, exc, "Exception", f"(TypeError, {exc})",
                           "FuzzError" if exc.startswith("Fuzz") else "LookupError" if exc in ("KeyError", "IndexError")
                           else "ArithmeticError" if exc == "ZeroDivisionError" else exc])
    if w.rng.random() < 0.1:
        caught = "TypeError"  # not this one: the exception leaves the function
    lines = [f"{t} = {w.rng.choice(tensors)} * 1", "try:"]
    body = scope.child()
    if w.rng.random() < 0.5:
        lines += w.indent(w.block(body, depth + 1, 1))
    lines += w.indent(_lines(text))
    lines.append(f"    {t} = {t} + {w.tensor(scope)}")
    lines.append(f"except {caught} as {e}:")
    handler = [f"{t} = {t} * {w.num(scope, 1)} - 1"]
    handler += w.rng.sample([f'print("caught", type({e}).__name__, len({e}.args), file=buf)' if "buf" in scope.names
                             else "pass", f"G_LIST.append(type({e}).__name__)", "obj.count += 1" if "obj" in scope.names
                             else "pass", f"G_LIST.append(str({e})[:20])",
                             f"G_LIST.append(getattr({e}, 'code', -1))"], w.rng.randint(1, 2))
    lines += w.indent(handler)
    if w.rng.random() < 0.35:
        lines += ["else:", f"    {t} = {t} - {w.tensor(scope)}"] + w.sub_block(scope, depth)
    if w.rng.random() < 0.35:
        lines += ["finally:", f"    G_LIST.append({w.num(scope, 1)})"]
        if "obj" in scope.names and w.rng.random() < 0.5:
            lines.append("    obj.log.append(len(G_LIST))")
    scope.define(t, "tensor")
    return lines


@statement("raise_in_helper", 2)
def raise_in_helper(w, scope, depth):
    """A user exception raised two calls deep, caught by its base class; re-raised or chained sometimes."""
    if "x" not in scope.names or depth >= w.MAX_DEPTH:
        return None
    define(w, "errors")
    t, e = w.fresh("t"), w.fresh("err")
    n = w.num(scope, 1)
    lines = [f"{t} = x * 0", "try:", f"    {t} = check_positive({w.tensor(scope)}, {n}) + {t}"]
    choice = w.rng.randrange(4)
    lines.append(f"except FuzzError as {e}:")
    if choice == 0:
        lines += [f"    {t} = {t} + {e}.code", "    G_LIST.append(str(" + e + "))"]
    elif choice == 1:  # handled then re-raised by an outer try
        lines = [f"{t} = x * 0", "try:"] + w.indent(lines[1:] + [f"    G_LIST.append({e}.code)", "    raise"]) + \
            ["except FuzzSubError as outer:", f"    {t} = {t} - 1", "    G_LIST.append(type(outer).__name__)"]
    elif choice == 2:  # chained: leaves the function as a ValueError caused by the user error
        lines += [f"    G_LIST.append({e}.code)", f"    raise ValueError('wrapped') from {e}"]
    else:
        lines += [f"    {t} = {t} * 2", f"    G_LIST.append(isinstance({e}, FuzzSubError))"]
        lines += ["else:", f"    {t} = {t} + 1"]
    scope.define(t, "tensor")
    return lines


@statement("stop_iteration", 2)
def stop_iteration(w, scope, depth):
    """``next`` with and without a default, a ``while True`` loop ended by ``StopIteration``."""
    lists = scope.of("list")
    tensors = scope.of("tensor")
    if not lists or not tensors:
        return None
    lst, it, t, n = w.rng.choice(lists), w.fresh("it"), w.fresh("t"), w.fresh("n")
    lines = [f"{it} = iter({lst})", f"{t} = next({it}, {w.rng.choice(tensors)})", f"{n} = 0"]
    if w.rng.random() < 0.6:
        lines += ["try:", "    while True:", f"        {t} = {t} + next({it})", f"        {n} += 1",
                  "except StopIteration:", f"    {n} = -{n}"]
    else:
        lines += ["try:", f"    {t} = next({it}) * next({it})", "except StopIteration as e:",
                  f"    {n} = len(e.args) + 7"]
    scope.define(t, "tensor")
    scope.define(n, "num")
    return lines


@statement("try_in_loop", 1.5)
def try_in_loop(w, scope, depth):
    """A loop whose body raises for some iterations: ``continue``/``break`` from the handler, ``finally`` each time."""
    tensors = scope.of("tensor")
    if not tensors or depth >= w.MAX_DEPTH:
        return None
    i, t = w.fresh("i"), w.fresh("t")
    bad = w.rng.choice(["1", "2", "k" if "k" in scope.names else "0"])
    exit_ = w.rng.choice(["continue", "break", "pass"])
    lines = [f"{t} = {w.rng.choice(tensors)} * 1", f"for {i} in range(3):", "    try:",
             f"        if {i} == {bad}:", f"            raise IndexError({i})", f"        {t} = {t} + {i}",
             "    except IndexError as e:", f"        {t} = {t} * 2", f"        {exit_}",
             "    finally:", f"        G_LIST.append({i})"]
    scope.define(t, "tensor")
    return lines


@statement("with_user_cm", 2.5)
def with_user_cm(w, scope, depth):
    """``with`` on a user context manager (logs; may swallow), a ``contextmanager`` generator, ``suppress``..."""
    tensors = scope.of("tensor")
    if not tensors or depth >= w.MAX_DEPTH:
        return None
    define(w, "tracker")
    t, v, log = w.fresh("t"), w.fresh("cm"), w.fresh("lst")
    logged = w.rng.choice(["G_LIST", "obj.log" if "obj" in scope.names else "G_LIST", log])
    lines = [f"{log} = []", f"{t} = {w.rng.choice(tensors)} * 1"]
    choice = w.rng.randrange(5)
    raise_text, exc = raiser(w, scope)
    raising = w.rng.random() < (0.5 if choice in (0, 2) else 0.2)  # only these may swallow it
    body = scope.child()
    inner = w.indent(w.block(body, depth + 1, 1)) if w.rng.random() < 0.4 else []
    if choice == 0:
        swallow = w.rng.choice(["True", "False"])
        lines.append(f"with Tracker({logged}, swallow={swallow}) as {v}:")
        lines += inner + [f"    {t} = {t} + len({v}.log)"]
    elif choice == 1:
        lines.append(f"with scoped({logged}, {t}) as {v}:")
        lines += inner + [f"    {t} = {v} + 1"]
    elif choice == 2:
        lines.append(f"with contextlib.suppress({exc}, TypeError):")
        lines += inner + [f"    {t} = {t} - 1"]
    elif choice == 3:
        lines.append(f"with contextlib.nullcontext({t} * 3) as {v}:")
        lines += inner + [f"    {t} = {v} + {t}"]
    else:
        lines += ["with contextlib.ExitStack() as stack:", f"    {v} = stack.enter_context(scoped({logged}, {t}))",
                  f"    stack.enter_context(Tracker({log}))", f"    {t} = {v} * {t}"]
        lines += inner
    if raising:
        lines += w.indent(_lines(raise_text))
    lines.append(f"{t} = {t} + len({log})")
    scope.define(t, "tensor")
    return lines


@statement("generator_protocol", 2)
def generator_protocol(w, scope, depth):
    """``send``/``close``/``throw`` on generators: the value of ``StopIteration`` from ``return``, a
    ``finally`` that runs at ``close()``, a thrown exception leaving the generator, ``send`` before start."""
    tensors = scope.of("tensor")
    if not tensors or depth >= w.MAX_DEPTH:
        return None
    define(w, "coroutines")
    g, t, n = w.fresh("gen"), w.fresh("t"), w.fresh("n")
    log = w.rng.choice(["G_LIST", "obj.log" if "obj" in scope.names else "G_LIST", w.fresh("lst")])
    lines = [f"{log} = []"] if not log.startswith(("G_", "obj")) else []
    lines += [f"{g} = running({w.rng.choice(tensors)}, {log})", f"{t} = next({g})", f"{n} = 0"]
    choice = w.rng.randrange(5)
    if choice == 0:
        lines += [f"{t} = {g}.send({w.tensor(scope)})", f"{t} = {g}.send({w.tensor(scope)} * 2) + {t}",
                  "try:", f"    {g}.send(None)", "except StopIteration as e:", f"    {n} = e.value + len(e.args)"]
    elif choice == 1:
        lines += [f"{t} = {g}.send({w.tensor(scope)})", f"{g}.close()", f"{n} = len({log}) + (next({g}, None) is None)"]
    elif choice == 2:
        lines = [f"{log} = []"] if not log.startswith(("G_", "obj")) else []
        lines += [f"{g} = guarded({log})", f"{t} = {w.rng.choice(tensors)} * 1", f"{n} = next({g}) + next({g})",
                  f"{g}.close()", f"{n} = {n} + len({log})"]
    elif choice == 3:
        lines += [f"{t} = {g}.send({w.rng.choice(tensors)})", "try:",
                  f"    {g}.throw(KeyError({w.num(scope, 1)}))", "except KeyError as e:",
                  f"    {n} = len(e.args) + e.args[0]", f"{n} = {n} + (next({g}, 5) == 5)"]
    else:
        lines = [f"{g} = running({w.rng.choice(tensors)}, G_LIST)", f"{t} = {w.rng.choice(tensors)} * 1", "try:",
                 f"    {g}.send(1)", "except TypeError as e:", f"    {n} = len(str(e))", f"    {t} = {t} + 1"]
    scope.define(t, "tensor")
    scope.define(n, "num")
    return lines


@statement("python_error_kinds", 2)
def python_error_kinds(w, scope, depth):
    """Errors whose raising depends on the call's inputs: unpacking a tensor or ``xs`` (their lengths change
    from call 2 on), ``ZeroDivisionError`` of ``%``/``divmod``/``//`` on ``k``; chained exceptions read back
    (``__context__``, ``__cause__``, ``from None``); ``except*`` on an ``ExceptionGroup``."""
    tensors = scope.of("tensor")
    if not tensors or depth >= w.MAX_DEPTH:
        return None
    t, n = w.fresh("t"), w.fresh("n")
    base = w.rng.choice(tensors)
    choice = w.rng.randrange(6)
    lines = [f"{t} = {base} * 1", f"{n} = 0"]
    if choice == 0 and "x" in scope.names:
        lines += ["try:", "    a_, b_, c_ = x", f"    {t} = {t} * (a_ + b_ * c_).sum()",
                  "except ValueError as e:", f"    {t} = {t} - 1", "    G_LIST.append(str(e))"]
    elif choice == 1 and "xs" in scope.names:
        lines += ["try:", "    p_, q_, r_ = xs", f"    {t} = {t} + p_ * q_ - r_",
                  "except ValueError as e:", f"    {n} = len(str(e))", "else:", f"    {n} = -1"]
    elif choice == 2 and "k" in scope.names:
        op = w.rng.choice([f"k % ({w.num(scope, 1)} * 0)", "divmod(k, 0)[0]", "k // (k - k)", "x.shape[0] % 0"])
        lines += ["try:", f"    {n} = {op}", "except ZeroDivisionError as e:",
                  f"    {n} = len(str(e)) + isinstance(e, ArithmeticError)", f"    {t} = {t} * 2"]
    elif choice == 3:
        text, exc = raiser(w, scope)
        tail = w.rng.choice(["", f" from {w.fresh('e')}", " from None"])
        inner = tail.split()[-1] if tail and tail != " from None" else "e_"
        lines += ["try:", "    try:"] + w.indent(w.indent(_lines(text))) + ["        n_ = 0"]
        lines += [f"    except {exc} as {inner}:", f"        raise RuntimeError('during'){tail}",
                  "except RuntimeError as e:",
                  f"    {n} = (e.__cause__ is not None) + (e.__context__ is not None) * 2 + e.__suppress_context__ * 4",
                  f"    {t} = {t} * {n}", "    G_LIST.append(type(e.__context__).__name__)"]
    elif choice == 4:
        lines += ["try:", f"    raise ExceptionGroup('grp', [ValueError({w.num(scope, 1)}), KeyError('k')])",
                  "except* ValueError as eg:", f"    {t} = {t} + len(eg.exceptions)",
                  "except* KeyError as eg:", f"    G_LIST.append(len(eg.exceptions))"]
    else:
        lines += ["try:", f"    {n} = [{w.num(scope, 1)}][{w.rng.choice(['1', '0', '-2'])}]",
                  "except IndexError as e:", f"    {n} = repr(e).count('index') + len(e.args)", "finally:",
                  f"    {t} = {t} + {w.tensor(scope)}"]
    scope.define(t, "tensor")
    scope.define(n, "num")
    return lines
