"""Fuzz productions for sets, frozensets and ``match`` statements (issue 8).

Sets of Python numbers are changed and read back as numbers in ways that
depend on CPython's own set order (``sum`` of floats, ``pop()``, ``str()``;
``k`` may be ``-0.0`` or ``True``, equal to other members).  Sets of tensors
are read through ``len`` and ``in``, and iterated only while they hold at
most two tensors (the sum of two terms does not depend on the order, which
follows the tensors' ids and differs from run to run, eager included).
``set_methods`` (not in grammar v1) covers the methods and frozensets:
subset tests, ``isdisjoint``, ``symmetric_difference``, ``copy``, sets of
strings and tuples, filtered comprehensions, frozensets as dict keys and
set members, and a set that escapes into ``G_LAST``.
``match`` statements take the entry point's arguments as subjects.
Registered by importing this module (``productions`` does).
"""
from __future__ import annotations

from .grammar import statement


@statement("set_numbers", 2)
def set_numbers(w, scope, depth):
    name, out = w.fresh("st"), w.fresh("n")
    num = lambda: w.num(scope, 1)  # noqa: E731
    if w.rng.random() < 0.7:
        lines = [f"{name} = {{{', '.join(num() for _ in range(w.rng.randint(1, 4)))}}}"]
    else:
        i = w.fresh("i")
        lines = [f"{name} = {{{i} * {w.rng.choice(['1', '2', '0.5', '-1'])} for {i} in range({w.rng.randint(0, 5)})}}"]
    changes = [
        lambda: f"{name}.add({num()})",
        lambda: f"{name}.discard({num()})",
        lambda: f"{name} |= {{{num()}, 7}}",
        lambda: f"{name} = {name} & {{0, 1, 2, 3, {num()}}}",
        lambda: f"{name} -= {{{num()}}}",
        lambda: f"{name} ^= {{{num()}, 2}}",
        lambda: f"{name}.update([{num()}, {num()}], (5,))",
        lambda: f"{name} = {name}.union({{9}}).difference({{{num()}}})",
        lambda: f"{name}.intersection_update(range(-1, 5))",
    ]
    for _ in range(w.rng.randint(1, 3)):
        lines.append(w.rng.choice(changes)())
    frozen = w.rng.random() < 0.2
    if frozen:  # last: a frozenset has no add/discard/pop
        lines.append(f"{name} = frozenset({name}) | {{{num()}}}")
    reads = [
        f"len({name}) + ({num()} in {name})",
        f"sum({name})",
        f"min({name}, default=0)",
        f"sorted({name})[-1] if {name} else 0",
        f"({name} <= {{0, 1, 2, 3, 7, 9}}) + len({name} | {{1}})",
        f"len(str({name}))",
        f"[v * 2 for v in {name}][0] if {name} else 1",
    ]
    if not frozen:
        reads.append(f"{name}.pop() if {name} else -1")
    lines.append(f"{out} = {w.rng.choice(reads)}")
    scope.define(out, "num")
    return lines


@statement("set_tensors", 1.5)
def set_tensors(w, scope, depth):
    tensors = [n for n in scope.of("tensor") if "." not in n]
    if len(tensors) < 2:
        return None
    a, b = w.rng.sample(tensors, 2)
    other = w.rng.choice(tensors)
    name, out = w.fresh("st"), w.fresh("n")
    built = [f"{{{a}, {b}, {a}}}", f"set([{a}, {b}])", f"{{{a}}} | {{{b}}}"]
    if "xs" in scope.names:
        built.append(f"{{e for e in xs}} | {{{a}}}")  # the list may hold the same tensor twice
    lines = [f"{name} = {w.rng.choice(built)}"]
    choice = w.rng.randrange(4) if "xs" not in lines[0] else w.rng.randrange(1, 4)
    if choice == 0:
        acc = w.fresh("t")
        lines += [f"{acc} = {a} * 0", f"for v in {name}:", f"    {acc} = {acc} + v"]
        scope.define(acc, "tensor")
    elif choice == 1:
        lines.append(f"{name}.discard({other})")
    elif choice == 2:
        lines.append(f"{name}.add({w.tensor(scope)})")
    else:
        lines.append(f"{name} = {name} - {{{other}}}")
    lines.append(f"{out} = len({name}) + ({other} in {name}) * 10 + ({a} in {name}) * 100")
    scope.define(out, "num")
    return lines


@statement("global_set", 1)
def global_set(w, scope, depth):
    """The module's ``G_SET``: read (``in``, ``len``, iteration), sometimes changed in place."""
    out = w.fresh("n")
    lines = []
    if w.rng.random() < 0.4:
        lines.append(w.rng.choice([f"G_SET.add({w.num(scope, 1)})", f"G_SET.discard({w.num(scope, 1)})",
                                   f"G_SET |= {{{w.num(scope, 1)}}}", "G_SET.discard(1)"]))
    lines.append(f"{out} = " + w.rng.choice([f"({w.num(scope, 1)} in G_SET) + len(G_SET)", "sum(G_SET)",
                                             "sorted(G_SET)[0] if G_SET else 0", "len(G_SET | {3})",
                                             "[v for v in G_SET][-1] if G_SET else 0"]))
    scope.define(out, "num")
    return lines


@statement("set_methods", 2)
def set_methods(w, scope, depth):
    a, b, n = w.fresh("st"), w.fresh("st"), w.fresh("n")
    num = lambda: w.num(scope, 1)  # noqa: E731
    made = [
        f"{{{num()}, {num()}, 3}}",
        f"{{str(v_) for v_ in range({w.rng.randint(1, 5)}) if v_ != {num()}}}",
        f"set('{w.rng.choice(['abc', 'hello', 'aab'])}')",
        f"{{(v_, v_ % 2) for v_ in range(3)}}",
        f"frozenset([{num()}, 1, 2])",
        f"set(range(int(abs({num()})) % 4 + 1))",
    ]
    lines = [f"{a} = {w.rng.choice(made)}", f"{b} = frozenset({{{num()}, 1, 'a', (0, 0)}})"]
    for _ in range(w.rng.randint(0, 2)):
        lines.append(w.rng.choice([
            f"{a} = {a}.symmetric_difference({b})", f"{a} = {a} | {b}.copy()",
            f"{a} = {a}.difference({b}, {{{num()}}})", f"{a} = set({a}).intersection({b}, {a})",
            f"{a} = {a} ^ {b}" if w.rng.random() < 0.5 else f"{a} = {b} - {a}",
        ]))
    lines.append(f"{n} = " + w.rng.choice([
        f"{a}.issubset({b}) + {b}.issuperset({{1}}) * 2 + {a}.isdisjoint({b}) * 4 + len({a})",
        f"len({{{b}: 1, frozenset({a}): 2}}) + ({b} in {{{b}, frozenset()}})",
        f"({a} == set({a})) + ({a} < {a} | {{99}}) + ({b} >= frozenset({{1}}))",
        f"len(sorted(map(repr, {a} | {b})))",
        f"sum(1 for v_ in {a} if v_ in {b})",
        f"len({a} & {b}) + isinstance({b}, frozenset) + (type({a} | {b}) is type({a}))",
    ]))
    if w.rng.random() < 0.2:
        scope.function.global_writes.add("G_LAST")
        lines.append(f"G_LAST = {w.rng.choice([a, b])}")
    scope.define(n, "num")
    return lines


def _subjects(scope):
    """(subject, [(pattern, [(capture, kind)]), ...]) for the subjects visible here."""
    found = []
    if "xs" in scope.names:
        found.append(("xs", [("[@1]", [("@1", "tensor")]), ("[@1, @2, *@3]", [("@1", "tensor"), ("@2", "tensor")]),
                             ("[]", [])]))
    if "d" in scope.names:
        found.append(("d", [('{"a": @1, "n": int(@2)}', [("@1", "tensor"), ("@2", "num")]),
                            ('{"n": 1 | 2 as @2}', [("@2", "num")]), ('{"a": @1, **@3}', [("@1", "tensor")])]))
    if "k" in scope.names:
        found.append(("k", [("int(@2) if @2 > 1", [("@2", "num")]), ("float() as @2", [("@2", "num")]),
                            ("True", []), ("0 | 1", [])]))
    if "obj" in scope.names:
        found.append(("obj", [("object(count=0, w=@1)", [("@1", "tensor")]),
                              ("object(count=int(@2))", [("@2", "num")])]))
    if "x" in scope.names and "k" in scope.names:
        found.append(("(x, k)", [("(@1, int() as @2)", [("@1", "tensor"), ("@2", "num")]),
                                 ("(@1, @2)", [("@1", "tensor"), ("@2", "num")])]))
    if "x" in scope.names:
        found.append(("x.shape", [("(@2, 4)", [("@2", "num")]), ("(@2, *_)", [("@2", "num")])]))
    return found


@statement("match_stmt", 2)
def match_stmt(w, scope, depth):
    subjects = _subjects(scope)
    if not subjects or depth >= w.MAX_DEPTH:
        return None
    subject, cases = w.rng.choice(subjects)
    t, n = w.fresh("t"), w.fresh("n")
    base = w.rng.choice(scope.of("tensor"))
    lines = [f"{t} = {base}", f"{n} = 0", f"match {subject}:"]
    chosen = w.rng.sample(cases, w.rng.randint(1, len(cases)))
    for pattern, captures in chosen:
        # Placeholders @1 @2 @3 become fresh names (captures, and names bound but never read).
        renames = {c: w.fresh("m") for c in ("@1", "@2", "@3")}
        for old, new in renames.items():
            pattern = pattern.replace(old, new)
        child = scope.child()
        for c, kind in captures:
            child.define(renames[c], kind)
        lines += [f"    case {pattern}:", f"        {t} = {w.tensor(child)}", f"        {n} = {w.num(child, 1)}"]
    if w.rng.random() < 0.7:
        lines += ["    case _:", f"        {n} = -1"]
    scope.define(t, "tensor")
    scope.define(n, "num")
    return lines
