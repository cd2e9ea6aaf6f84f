"""Fuzz productions for the standard library and objects (issue 8): collections, itertools, user classes.

``defaultdict``/``OrderedDict`` are made, changed and read back (keys in
insertion order, missing keys making defaults); ``itertools.chain`` and
``zip(strict=True)`` walk the entry point's lists; objects of the module's
``Box`` class are made in the function, changed, read, and sometimes escape
(into ``G_LAST``, or ``obj.log``) so that they must be rebuilt after the graph.  ``Box``,
``collections`` and ``itertools`` are in ``grammar.HEADER``.  ``collections_methods``: ``Counter``
arithmetic, ``deque``/``ChainMap``/``OrderedDict`` methods (a ``ChainMap`` over ``d`` writes into it).
Registered by importing this module (``productions`` does).
"""
from __future__ import annotations

from .grammar import statement

@statement("defaultdict_group", 1.5)
def defaultdict_group(w, scope, depth):
    tensors = scope.of("tensor")
    if not tensors:
        return None
    dd, out, i, t = w.fresh("dd"), w.fresh("n"), w.fresh("i"), w.fresh("t")
    factory = w.rng.choice(["list", "int"])
    source = "xs" if "xs" in scope.names and w.rng.random() < 0.6 else f"[{', '.join(w.rng.sample(tensors, 1) * 2)}]"
    lines = [f"{dd} = collections.defaultdict({factory})"]
    if factory == "list":
        lines += [f"for {i}, {t} in enumerate({source}):", f"    {dd}[{i} % 2].append({t} * {w.num(scope, 1)})"]
        lines.append(f"{out} = len({dd}) + sum(len(v) for v in {dd}.values()) + len({dd}[5])")
    else:
        lines += [f"for {i} in range({w.rng.randint(0, 4)}):", f"    {dd}[{i} % 3] += {w.num(scope, 1)}"]
        lines.append(f"{out} = sum({dd}.values()) + {dd}[7] + len(list({dd}.keys()))")
    scope.define(out, "num")
    return lines


@statement("ordered_dict", 1.5)
def ordered_dict(w, scope, depth):
    tensors = scope.of("tensor")
    if not tensors:
        return None
    od, out, t = w.fresh("od"), w.fresh("n"), w.fresh("t")
    keys = w.rng.sample(["a", "b", "c", "d"], w.rng.randint(1, 3))
    lines = [f"{od} = collections.OrderedDict()"]
    for key in keys:
        lines.append(f"{od}[{key!r}] = {w.tensor(scope)}")
    if w.rng.random() < 0.5:
        lines.append(f"{od}.pop({keys[0]!r})")
    if w.rng.random() < 0.3:
        lines.append(f"{od}.setdefault('z', {w.rng.choice(tensors)})")
    lines.append(f"{t} = {w.rng.choice(tensors)} * 0")
    lines.append(f"for key, v in {od}.items():")
    lines.append(f"    {t} = {t} * 2 + v")
    lines.append(f"{out} = len({od}) + (list({od}) == sorted({od}))")
    scope.define(t, "tensor")
    scope.define(out, "num")
    return lines


@statement("chain_zip", 1.5)
def chain_zip(w, scope, depth):
    tensors = scope.of("tensor")
    if not tensors or "xs" not in scope.names:
        return None
    t, a, b = w.fresh("t"), w.fresh("a"), w.fresh("b")
    other = w.rng.choice(tensors)
    if w.rng.random() < 0.5:
        lines = [f"{t} = {other} * 0", f"for {a} in itertools.chain(xs, [{other}], xs[:1]):", f"    {t} = {t} + {a}"]
    else:
        lines = [f"{t} = {other} * 0", f"for {a}, {b} in zip(xs, list(reversed(xs)), strict=True):",
                 f"    {t} = {t} + {a} * {b}"]
    scope.define(t, "tensor")
    return lines


@statement("box_object", 2)
def box_object(w, scope, depth):
    tensors = scope.of("tensor")
    if not tensors:
        return None
    box, t = w.fresh("bx"), w.fresh("t")
    lines = [f"{box} = Box({w.tensor(scope)}, {w.num(scope, 1)})"]
    for _ in range(w.rng.randint(0, 2)):
        lines.append(w.rng.choice([f"{box}.bump()", f"{box}.bump({w.num(scope, 1)}).bump()",
                                   f"{box}.v = {box}.v + {w.rng.choice(tensors)}", f"{box}.extra = {box}.s * 2"]))
    lines.append(f"{t} = {box}.get() + {box}.v * (isinstance({box}, Box) + (type({box}) is Box))")
    escape = w.rng.random()
    if escape < 0.15 and "obj" in scope.names:
        lines.append(f"obj.log.append({box})")
    elif escape < 0.3:
        scope.function.global_writes.add("G_LAST")
        lines.append(f"G_LAST = {box}")
    scope.define(t, "tensor")
    return lines


@statement("collections_methods", 2)
def collections_methods(w, scope, depth):
    """``Counter`` arithmetic and comparisons, ``deque`` methods (numbers: ``index``/``remove``/``insert``;
    tensors: ``extendleft``, item assignment, ``maxlen``), ``ChainMap`` children and writes that reach the
    argument ``d``, ``OrderedDict`` reordering, order-sensitive equality and ``|``."""
    tensors = scope.of("tensor")
    if not tensors:
        return None
    n, t, c = w.fresh("n"), w.fresh("t"), w.fresh("cl")
    num = lambda: w.num(scope, 1)  # noqa: E731
    base = w.rng.choice(tensors)
    choice = w.rng.randrange(6)
    if choice == 0:
        other = w.fresh("cl")
        op = w.rng.choice(["+", "-", "&", "|"])
        lines = [f"{c} = collections.Counter(a={num()}, b=2, c=-1)", f"{other} = collections.Counter({{'a': 1, 'b': {num()}}})",
                 f"{n} = {c} {op} {other}" if w.rng.random() < 0.7 else f"{n} = {w.rng.choice(['+', '-'])}{c}",
                 f"{t} = {base} * {n}['b'] + len({n})",
                 f"{n} = sum({n}.values()) + ({c} == {other}) + ({c} <= {c} + {other})"]
        if w.rng.random() < 0.4:
            lines.insert(2, f"{c}.{w.rng.choice(['update', 'subtract'])}({other})")
    elif choice == 1:
        lines = [f"{c} = collections.deque([{num()}, 3, {num()}, 3])",
                 w.rng.choice([f"{c}.remove(3)", f"{c}.insert(1, {num()})", f"{c}.reverse()", f"{c}.rotate(-2)",
                               f"{c}.extendleft([7, {num()}])"]),
                 f"{n} = {c}.index(3) + {c}.count(3) * 10 + len({c}) + {c}[-1]"]
        if w.rng.random() < 0.3:
            lines.append(f"{c}.clear()")
            lines.append(f"{n} = {n} + len({c})")
    elif choice == 2:
        lines = [f"{c} = collections.deque([{base}, {w.tensor(scope)}], maxlen={w.rng.choice(['2', '3'])})",
                 f"{c}.extendleft([{w.tensor(scope)}])", f"{c}[0] = {c}[0] * 2",
                 f"{c}.append({c}.popleft() + 1)" if w.rng.random() < 0.5 else f"{c}.rotate()",
                 f"{t} = {c}[0] - {c}[-1] * {c}.maxlen", f"{n} = len({c}) + ({c}.maxlen or 0)"]
        if w.rng.random() < 0.2:
            scope.function.global_writes.add("G_LAST")
            lines.append(f"G_LAST = {c}")
    elif choice == 3:
        child = w.fresh("cl")
        inner = "d" if "d" in scope.names else "{'a': x, 'n': 0}"
        lines = [f"{c} = collections.ChainMap({{'n': {num()}}}, {inner})", f"{child} = {c}.new_child({{'z': {base}}})",
                 f"{child}['n'] = {num()}", f"{n} = {child}['n'] + {c}['n'] + len({child}.parents.maps) + len({child})",
                 f"{t} = {child}.get('z', {base}) + {child}.get('a', {base})"]
        if w.rng.random() < 0.5:
            lines += [f"del {c}['n']", f"{n} = {n} + {c}.get('n', 0) + ('n' in {c})"]
    elif choice == 4 and "d" in scope.names and "d" not in scope.frozen:
        lines = [f"{c} = collections.ChainMap(d)", f"{c}['q'] = {num()}",  # writes reach d (the first map)
                 f"{t} = {c}.get('a', {base}) * len({c})", f"{n} = {c}['q'] + len(d) + list({c}.keys()).index('q')"]
    else:
        other = w.fresh("od")
        lines = [f"{c} = collections.OrderedDict([('a', {base}), ('b', 1), ('c', {num()})])",
                 w.rng.choice([f"{c}.move_to_end('a')", f"{c}.move_to_end('c', last=False)",
                               f"{c}['b'] = {c}.pop('b') + 1"]),
                 f"{other} = collections.OrderedDict(reversed(list({c}.items())))",
                 f"{n} = ({c} == {other}) + (dict({c}) == dict({other})) * 2 + list(reversed({c})).index('b')",
                 f"{t} = {c}.popitem(last={w.rng.choice(['True', 'False'])})[1] * 1 + ({c} | {{'z': {base}}})['z']"]
    for line in lines:
        if line.startswith(f"{t} ="):
            scope.define(t, "tensor")
        if line.startswith(f"{n} ="):
            scope.define(n, "num")
    return lines
