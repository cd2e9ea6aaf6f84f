"""Fuzz productions for builtins and the standard library (issue 8 item 3) around tensor code.

``functools.partial``/``reduce`` (over torch functions, lambdas and module
helpers), ``itertools`` (``accumulate``, ``product``, ``combinations``,
``permutations``, ``islice``/``count``, ``repeat``, ``zip_longest``,
``groupby``, ``starmap``, ``chain.from_iterable``), ``operator``
(``add``/``mul``, ``itemgetter``, ``attrgetter``, ``methodcaller``),
``collections`` (``Counter``, ``deque``, ``OrderedDict`` reordering,
``defaultdict`` with a lambda, ``ChainMap``), ``sorted``/``min``/``max``/
``list.sort`` with keys, ``map``/``filter``, and string formatting (f-strings
with format specs, ``%``, ``str.format``, ``join``, str methods) whose text
is printed, logged or used as a key.  ``functools_wrappers`` (``wraps``, ``lru_cache``/``cache`` whose
state lasts over the calls, ``cached_property``, ``cmp_to_key``), ``copy_calls`` (``copy``/``deepcopy``
of arguments, objects and aliased lists) and ``itertools_lazy`` (``cycle``, ``tee``, ``groupby`` with a key,
``takewhile``/``dropwhile`` whose predicates break) and ``operator_state`` (``iadd``/``setitem``/``methodcaller``
changing lists and dicts, ``attrgetter`` of several names) came in session 19.  Sorting keys never tie on tensors
(the order of equal keys is then CPython's stable order either way).
Registered by importing this module (``productions`` does).
"""
from __future__ import annotations

from .grammar import statement

IMPORTS = '''
import functools
import operator


def scaled_add(a, b, *, alpha=1):
    return a + b * alpha
'''


def define_imports(w) -> None:
    if "stdlib" not in w.module_helpers:
        w.module_helpers["stdlib"] = "stdlib"
        w.module_lines += IMPORTS.strip("\n").splitlines() + ["", ""]


def _nums(w, scope, count=None) -> str:
    return ", ".join(w.num(scope, 1) for _ in range(count or w.rng.randint(1, 4)))


@statement("functools_calls", 2)
def functools_calls(w, scope, depth):
    tensors = scope.of("tensor")
    if not tensors:
        return None
    define_imports(w)
    f, t = w.fresh("pf"), w.fresh("t")
    made, arity = w.rng.choice([  # (the partial, how many tensors its call takes)
        (f"functools.partial(torch.add, alpha={w.rng.choice(['2', '0.5'])})", 2),
        (f"functools.partial(scaled_add, alpha={w.num(scope, 1)})", 2),
        (f"functools.partial(scaled_add, {w.rng.choice(tensors)})", 1),
        (f"functools.partial(lambda a, b, c=1: a * c - b, c={w.num(scope, 1)})", 2),
        ("functools.partial(functools.partial(scaled_add, alpha=3), b=1)", 1),
    ])
    lines = [f"{f} = {made}"]
    call = f"{f}({', '.join(w.tensor(scope) for _ in range(arity))})"
    lines.append(f"{t} = {call}")
    if w.rng.random() < 0.5:
        lst = w.rng.choice(scope.of("list") or [f"[{w.rng.choice(tensors)}]"])
        lines.append(f"{t} = " + w.rng.choice([
            f"functools.reduce(operator.add, {lst}, {t})",
            f"functools.reduce(lambda a, b: a * 0.5 + b, {lst}, {t})",
            f"functools.reduce(torch.maximum, {lst} + [{t}])",
            f"{t} + functools.reduce(operator.mul, [{_nums(w, scope)}], 1)",
        ]))
    if w.rng.random() < 0.2 and "buf" in scope.names:
        lines.append(f"print({f}.keywords == {{}}, len({f}.args), file=buf)")
    scope.define(t, "tensor")
    return lines


@statement("itertools_calls", 2.5)
def itertools_calls(w, scope, depth):
    tensors = scope.of("tensor")
    if not tensors:
        return None
    t, n = w.fresh("t"), w.fresh("n")
    lst = w.rng.choice(scope.of("list") or ["[" + ", ".join(w.rng.sample(tensors, min(2, len(tensors)))) + "]"])
    base = w.rng.choice(tensors)
    choice = w.rng.randrange(11)
    if choice == 0:
        lines = [f"{n} = list(itertools.accumulate([{_nums(w, scope)}]))[-1]"]
    elif choice == 1:
        lines = [f"{n} = sum(a_ * b_ for a_, b_ in itertools.product(range(2), repeat=2))",
                 f"{t} = {base} * {n}"]
    elif choice == 2:
        lines = [f"{t} = {base} * 0", f"for a_, b_ in itertools.combinations({lst}, 2):", f"    {t} = {t} + a_ * b_"]
    elif choice == 3:
        lines = [f"{t} = {base} * 0", f"for a_, b_ in itertools.permutations({lst}[:3], 2):", f"    {t} = {t} + a_ - b_ * 0.5"]
    elif choice == 4:
        lines = [f"{n} = sum(itertools.islice(itertools.count({w.num(scope, 1)}, 2), 3))"]
    elif choice == 5:
        lines = [f"{t} = sum(itertools.repeat({w.tensor(scope)}, {w.rng.choice(['0', '2'])}), {base})"]
    elif choice == 6:
        lines = [f"{t} = {base} * 0", f"for a_, b_ in itertools.zip_longest({lst}, [{base}], fillvalue={base}):",
                 f"    {t} = {t} + a_ * b_"]
    elif choice == 7:
        lines = [f"{n} = [(key_, len(list(g_))) for key_, g_ in itertools.groupby(sorted([{_nums(w, scope)}, 1, 1]))]",
                 f"{n} = len({n}) + {n}[0][1]"]
    elif choice == 8:
        define_imports(w)
        lines = [f"{t} = sum(itertools.starmap(operator.mul, zip({lst}, [{base}, 2, 3])), {base})"]
    elif choice == 9:
        lines = [f"{t} = sum(itertools.chain.from_iterable([{lst}, [{base}]]), {base} * 0)"]
    else:
        lines = [f"{n} = len(list(itertools.pairwise([{_nums(w, scope)}]))) + len(list(itertools.takewhile("
                 f"lambda v_: v_ < 2, [{_nums(w, scope)}])))"]
    for line in lines:
        if line.startswith(f"{t} ="):
            scope.define(t, "tensor")
        if line.startswith(f"{n} ="):
            scope.define(n, "num")
    return lines


@statement("operator_calls", 1.5)
def operator_calls(w, scope, depth):
    tensors = scope.of("tensor")
    if not tensors:
        return None
    define_imports(w)
    t, n = w.fresh("t"), w.fresh("n")
    a, b = w.tensor(scope), w.rng.choice(tensors)
    lines = [f"{t} = " + w.rng.choice([f"operator.add({a}, {b})", f"operator.mul({a}, {w.num(scope, 1)})",
                                       f"operator.neg({a})", f"operator.truediv({a}, 2)",
                                       f"operator.methodcaller('clamp', -1.0, 1.0)({a})",
                                       f"operator.itemgetter(0)(xs)" if "xs" in scope.names else f"operator.pos({a})",
                                       f'operator.itemgetter("a")(d) if "a" in d else {a}' if "d" in scope.names
                                       else f"operator.abs({a})"])]
    if w.rng.random() < 0.5:
        lines.append(f"{n} = " + w.rng.choice([f"operator.attrgetter('count')(obj)" if "obj" in scope.names else "0",
                                               f"operator.itemgetter(1, 0)(({w.num(scope, 1)}, 3))[0]",
                                               f"operator.index(3) + operator.floordiv(7, 2)",
                                               f"operator.lt({w.num(scope, 1)}, {w.num(scope, 1)})"]))
        scope.define(n, "num")
    scope.define(t, "tensor")
    return lines


@statement("collections_calls", 2.5)
def collections_calls(w, scope, depth):
    tensors = scope.of("tensor")
    if not tensors:
        return None
    n, t = w.fresh("n"), w.fresh("t")
    choice = w.rng.randrange(5)
    if choice == 0:
        c = w.fresh("cnt")
        lines = [f"{c} = collections.Counter([{_nums(w, scope)}, 1, 'a', 'a'])"]
        lines.append(w.rng.choice([f"{c}.update(['a', {w.num(scope, 1)}])", f"{c}['b'] += 2",
                                   f"{c}.subtract({{'a': 1}})", f"{c}[{w.num(scope, 1)}] += 1"]))
        lines.append(f"{n} = " + w.rng.choice([f"{c}['a'] + {c}['zz'] + len({c})", f"{c}.most_common(1)[0][1]",
                                               f"sum({c}.values()) + len(list({c}.elements()))",
                                               f"len({c} + collections.Counter(a=1))", f"{c}.total()"]))
        if w.rng.random() < 0.3:
            scope.define(c, "dict")
        scope.define(n, "num")
        return lines
    if choice == 1:
        q = w.fresh("dq")
        lines = [f"{q} = collections.deque([{w.rng.choice(tensors)}], maxlen={w.rng.choice(['2', '3', 'None'])})"]
        for _ in range(w.rng.randint(1, 4)):
            lines.append(w.rng.choice([f"{q}.append({w.tensor(scope)})", f"{q}.appendleft({w.tensor(scope)})",
                                       f"{q}.rotate({w.rng.choice(['1', '-1'])})",
                                       f"{q}.extend(xs)" if "xs" in scope.names else f"{q}.append(x)",
                                       f"{q}.pop() if len({q}) > 1 else None",
                                       f"{q}.popleft() if len({q}) > 1 else None"]))
        lines.append(f"{t} = sum({q}, {q}[0] * 0) + {q}[-1] * len({q})")
        if w.rng.random() < 0.2:
            scope.function.global_writes.add("G_LAST")
            lines.append(f"G_LAST = {q}")
        scope.define(t, "tensor")
        return lines
    if choice == 2:
        od = w.fresh("od")
        lines = [f"{od} = collections.OrderedDict(a={w.rng.choice(tensors)}, b={w.tensor(scope)}, c=2)",
                 w.rng.choice([f"{od}.move_to_end('a')", f"{od}.move_to_end('c', last=False)",
                               f"{od}.popitem(last=False)", f"{od}.popitem()"]),
                 f"{n} = len({od}) + (list({od})[0] == 'b')",
                 f"{t} = {od}.get('a', {w.rng.choice(tensors)}) + {od}.get('b', 1)"]
        scope.define(n, "num")
        scope.define(t, "tensor")
        if w.rng.random() < 0.4:
            scope.define(od, "dict")
        return lines
    if choice == 3:
        dd = w.fresh("dd")
        lines = [f"{dd} = collections.defaultdict(lambda: {w.rng.choice(tensors)} * 0)",
                 f"{dd}['p'] = {dd}['p'] + {w.tensor(scope)}", f"{dd}['q'] += 1",
                 f"{t} = {dd}['p'] + {dd}['q'] + {dd}['r']", f"{n} = len({dd}) + ('s' in {dd})"]
        scope.define(n, "num")
        scope.define(t, "tensor")
        return lines
    cm = w.fresh("cm")
    inner = '{"a": x, "n": 0}' if "d" not in scope.names else "d"
    lines = [f"{cm} = collections.ChainMap({{'n': {w.num(scope, 1)}, 'z': 1}}, {inner})",
             f"{n} = {cm}['n'] + len({cm}) + ('a' in {cm})", f"{cm}['w'] = 3",
             f"{t} = {cm}.get('a', {w.rng.choice(tensors)}) * {cm}['w']"]
    scope.define(n, "num")
    scope.define(t, "tensor")
    return lines


@statement("sorted_keys", 2)
def sorted_keys(w, scope, depth):
    tensors = scope.of("tensor")
    if not tensors:
        return None
    n, t = w.fresh("n"), w.fresh("t")
    choice = w.rng.randrange(6)
    if choice == 0:
        lines = [f"{n} = sorted([{_nums(w, scope)}, -3], key=abs, reverse={w.rng.choice(['True', 'False'])})[0]"]
        scope.define(n, "num")
    elif choice == 1:
        lines = [f"{n} = max([('a', {w.num(scope, 1)}), ('b', 2), ('c', -1)], key=lambda p_: p_[1])[1]",
                 f"{n} = {n} + min(range(4), key=lambda v_: (v_ - 2) ** 2)"]
        scope.define(n, "num")
    elif choice == 2 and "xs" in scope.names:
        lines = [f"{t} = max(xs, key=lambda e_: e_.shape[0]) + min(xs + [x], key=len)" if "x" in scope.names
                 else f"{t} = max(xs, key=lambda e_: e_.shape[0])"]
        scope.define(t, "tensor")
    elif choice == 3:
        lst = w.fresh("lst")
        lines = [f"{lst} = [{', '.join(w.rng.choice(tensors) + f' * {i + 1}' for i in range(3))}]",
                 f"{lst}.sort(key=lambda e_: e_.abs().sum().item(), reverse=True)", f"{t} = {lst}[0] - {lst}[-1]"]
        w.use("item")
        scope.define(t, "tensor")
        scope.define(lst, "list")
    elif choice == 4:
        lines = [f"{n} = list(map(lambda v_: v_ * 2, [{_nums(w, scope)}]))",
                 f"{n} = len(list(filter(lambda v_: v_ > 0, {n}))) + sum({n})"]
        scope.define(n, "num")
    else:
        lst = w.rng.choice(scope.of("list") or [f"[{w.rng.choice(tensors)}]"])
        lines = [f"{t} = sum(map(torch.relu, {lst}), {w.rng.choice(tensors)})",
                 f"{n} = len(list(filter(None, [0, 1, {w.num(scope, 1)}])))"]
        scope.define(t, "tensor")
        scope.define(n, "num")
    return lines


@statement("str_format", 2.5)
def str_format(w, scope, depth):
    """Text from numbers, shapes and dtypes: f-string specs, ``%``, ``format``, ``join``, str methods."""
    s = w.fresh("txt")
    num = w.num(scope, 1)
    text = w.rng.choice([
        f"f'{{{num}:.3f}}|{{{num}!r}}|{{{num}:>8}}|{{{num}:+g}}'",  # single quotes: nums hold "n"
        f'"%s-%.2f-%5.1f" % ({num}, {num}, {w.num(scope, 1)})',
        f'"{{}}/{{:06.2f}}/{{n}}".format({num}, {num}, n={w.num(scope, 1)})',
        f'"-".join(str(v_) for v_ in [{_nums(w, scope)}])',
        "f'{tuple(x.shape)}:{x.dtype}'" if "x" in scope.names else '"none"',
        f'"{{:,}}".format(int({num}) * 1000) + "{{:e}}".format({num})',
        f'str({num}).replace(".", "p").upper().strip().rjust(6, "0")',
        f'" ".join(["a", "b", repr({num})]).split()[-1] * 2',
        f'"{{0}}{{0}}{{1!s:^5}}".format({num}, "c").lower().startswith("1")',
    ])
    lines = [f"{s} = {text}"]
    sink = w.rng.randrange(4)
    if sink == 0 and "buf" in scope.names:
        lines.append(f"print({s}, len(str({s})), file=buf)")
    elif sink == 1:
        lines.append(f"G_LIST.append({s})")
    elif sink == 2 and "d" in scope.names and "d" not in scope.frozen:
        lines.append(f"d[str({s})[:4]] = {w.num(scope, 1)}")
    else:
        n = w.fresh("n")
        lines.append(f"{n} = len(str({s})) + str({s}).count('1')")
        scope.define(n, "num")
    return lines


WRAPPERS = '''
import copy


def logged(f):
    @functools.wraps(f)
    def inner(*args, **kwargs):
        G_LIST.append(f.__name__)
        return f(*args, **kwargs)
    return inner


@logged
def shifted(t, by=1):
    """Shift t."""
    return t + by


@functools.lru_cache(maxsize=4)
def table(n):
    G_LIST.append(("table", n))
    return n * n + 1


class Lazy:
    def __init__(self, t):
        self.t = t
        self.calls = 0

    @functools.cached_property
    def norm(self):
        self.calls += 1
        return self.t.abs().sum()
'''


def define_wrappers(w) -> None:
    """``copy``, a ``functools.wraps`` decorator, an ``lru_cache`` (its state lasts over the calls) and a
    ``cached_property``: written into the program on first use."""
    define_imports(w)
    if "wrappers" not in w.module_helpers:
        w.module_helpers["wrappers"] = "wrappers"
        w.module_lines += WRAPPERS.strip("\n").splitlines() + ["", ""]


def _some_list(w, scope, tensors) -> str:
    return w.rng.choice(scope.of("list") or ["[" + ", ".join(w.rng.sample(tensors, min(2, len(tensors)))) + "]"])


@statement("functools_wrappers", 2)
def functools_wrappers(w, scope, depth):
    """``wraps`` (module-level and made in the function), ``lru_cache``/``cache`` whose hits are read,
    ``cached_property`` (computed once, deleted, recomputed), ``cmp_to_key`` over numbers and tensors."""
    tensors = scope.of("tensor")
    if not tensors:
        return None
    define_wrappers(w)
    t, n = w.fresh("t"), w.fresh("n")
    choice = w.rng.randrange(6)
    if choice == 0:
        lines = [f"{t} = shifted({w.tensor(scope)}, {w.num(scope, 1)})",
                 f"{n} = len(shifted.__name__) + (shifted.__wrapped__.__name__ == 'shifted') + len(shifted.__doc__)"]
    elif choice == 1:
        deco, inner, h = w.fresh("deco"), w.fresh("inner"), w.fresh("hw")
        lines = [f"def {deco}(f):", "    @functools.wraps(f)", f"    def {inner}(t):", "        G_LIST.append(f.__name__)",
                 "        return f(t) * 2", f"    return {inner}", f"@{deco}", f"def {h}(t):",
                 f"    return t + {w.num(scope, 1)}", f"{t} = {h}({w.tensor(scope)})",
                 f"{n} = len({h}.__qualname__) + ({h}.__wrapped__ is not {h})"]
    elif choice == 2:
        a = w.num(scope, 1)
        lines = [f"{n} = table({a}) + table({w.rng.choice(['1', '2', a])}) + table.cache_info().hits",
                 f"{t} = {w.rng.choice(tensors)} * table(2)"]
    elif choice == 3:
        sq = w.fresh("sq")
        lines = ["@functools.cache", f"def {sq}(v):", "    G_LIST.append(v)", "    return v * 2",
                 f"{n} = {sq}(1) + {sq}({w.num(scope, 1)}) + {sq}(1) + {sq}.cache_info().misses",
                 f"{t} = {w.rng.choice(tensors)} + {sq}(3)"]
    elif choice == 4:
        lz = w.fresh("lz")
        lines = [f"{lz} = Lazy({w.tensor(scope)})", f"{t} = {lz}.norm * {w.rng.choice(tensors)} + {lz}.norm",
                 f"{n} = {lz}.calls + ('norm' in vars({lz}))"]
        if w.rng.random() < 0.5:
            lines += [f"del {lz}.norm", f"{lz}.t = {lz}.t * 2", f"{t} = {t} + {lz}.norm", f"{n} = {n} + {lz}.calls"]
        if w.rng.random() < 0.3:
            scope.function.global_writes.add("G_LAST")
            lines.append(f"G_LAST = {lz}")
    else:
        if w.rng.random() < 0.5:
            lines = [f"{n} = sorted([{_nums(w, scope)}, -2], key=functools.cmp_to_key(lambda a_, b_: (a_ > b_) - "
                     f"(a_ < b_)), reverse={w.rng.choice(['True', 'False'])})[0]"]
        else:
            lst, base = w.fresh("lst"), w.rng.choice(tensors)
            lines = [f"{lst} = [{base} * 1, {base} * -2, {base} * 3]",
                     f"{lst}.sort(key=functools.cmp_to_key(lambda a_, b_: int(torch.sign((a_ - b_).sum()).item())))",
                     f"{t} = {lst}[0] - {lst}[-1] * 0.5", f"{n} = len({lst})"]
            w.use("item")
            scope.define(lst, "list")
    for line in lines:
        if line.startswith(f"{t} ="):
            scope.define(t, "tensor")
    scope.define(n, "num")
    return lines


@statement("copy_calls", 2)
def copy_calls(w, scope, depth):
    """``copy.copy``/``copy.deepcopy`` of the arguments, of objects and of aliased lists; the copy and the
    original are both changed and read back (a shallow copy shares what it holds)."""
    tensors = scope.of("tensor")
    if not tensors:
        return None
    define_wrappers(w)
    t, n, c = w.fresh("t"), w.fresh("n"), w.fresh("cp")
    base = w.rng.choice(tensors)
    choice = w.rng.randrange(6)
    if choice == 0 and "xs" in scope.names and "xs" not in scope.frozen:
        lines = [f"{c} = copy.copy(xs)", f"{c}.append({w.tensor(scope)})", f"{c}[0] = {c}[0] * 2 if xs else {base}",
                 f"{t} = {c}[-1] + (xs[0] if xs else {base})",
                 f"{n} = len({c}) - len(xs) + (len(xs) > 1 and {c}[1] is xs[1])"]
    elif choice == 1 and "d" in scope.names and "d" not in scope.frozen:
        lines = [f"{c} = copy.deepcopy(d)", f'{c}["a"] = {c}.get("a", {base}) + 1', f'{c}["n"] = {c}.get("n", 0) + 1',
                 f'{t} = {c}["a"] - d.get("a", {base})',
                 f'{n} = {c}["n"] - d.get("n", 0) + ({c}.get("a") is d.get("a")) + len({c})']
        if w.rng.random() < 0.4:
            lines.insert(1, f'{c}.get("a", {base}).add_(1)')
    elif choice == 2:
        bx = w.fresh("bx")
        lines = [f"{bx} = Box({w.tensor(scope)}, {w.rng.choice(['1', '2'])})",
                 f"{c} = copy.{w.rng.choice(['copy', 'deepcopy'])}({bx})", f"{c}.bump()", f"{c}.v.mul_(2)",
                 f"{t} = {bx}.v + {c}.v", f"{n} = {bx}.s + {c}.s + ({c}.v is {bx}.v)"]
    elif choice == 3 and "obj" in scope.names and "obj" not in scope.frozen:
        lines = [f"{c} = copy.copy(obj)", f"{c}.count = {c}.count + 5", f"{c}.log.append({w.num(scope, 1)})",
                 f"{t} = {c}.w * obj.count", f"{n} = obj.count + {c}.count + len(obj.log)"]
    elif choice == 4:
        pair = w.fresh("lst")
        lines = [f"{pair} = [{w.tensor(scope)}]", f"{pair}.append({pair}[0])", f"{c} = copy.deepcopy({pair})",
                 f"{c}[0].add_(1)", f"{t} = {c}[1] + {pair}[0]", f"{n} = ({c}[0] is {c}[1]) + ({c}[0] is {pair}[0])"]
    else:
        lines = [f"{c} = copy.copy(G_LIST)", f"{c}.append({w.num(scope, 1)})",
                 f"{n} = len({c}) - len(G_LIST) + len(copy.deepcopy(G_SET))", f"{t} = {base} * len({c})"]
    scope.define(t, "tensor")
    scope.define(n, "num")
    return lines


@statement("itertools_lazy", 2)
def itertools_lazy(w, scope, depth):
    """Lazy ``itertools`` read one item at a time: ``cycle``, ``tee``, ``groupby`` with a key, ``takewhile``/
    ``dropwhile`` whose predicate breaks (``.item()``, ``bool`` of a tensor), ``count``, ``accumulate`` with
    a function, ``compress``/``filterfalse``, a ``chain`` read partly by ``next``."""
    tensors = scope.of("tensor")
    if not tensors:
        return None
    define_imports(w)
    t, n, it = w.fresh("t"), w.fresh("n"), w.fresh("it")
    lst, base = _some_list(w, scope, tensors), w.rng.choice(tensors)
    choice = w.rng.randrange(9)
    if choice == 0:
        lines = [f"{t} = sum(itertools.islice(itertools.cycle({lst}), {w.rng.choice(['3', '5'])}), {base} * 0)"]
    elif choice == 1:
        a, b = w.fresh("it"), w.fresh("it")
        lines = [f"{a}, {b} = itertools.tee(iter({lst}))", f"{t} = next({a}, {base})",
                 f"{t} = {t} + sum({b}, {base} * 0) * 2 + sum({a}, {base} * 0)"]
    elif choice == 2:
        lines = [f"{t} = {base} * 0", f"for key_, g_ in itertools.groupby([(1, {base}), (1, {w.tensor(scope)}), "
                 f"(2, {base})], key=operator.itemgetter(0)):", f"    {t} = {t} + sum(p_[1] for p_ in g_) * key_"]
    elif choice == 3:
        lines = [f"{t} = sum(itertools.takewhile(lambda e_: e_.abs().sum().item() < {w.rng.choice(['5', '9', '30'])}, "
                 f"{lst}), {base} * 0)"]
        w.use("item")
    elif choice == 4:
        lines = [f"{n} = len(list(itertools.dropwhile(lambda e_: bool(e_.sum() > 0), {lst})))",
                 f"{t} = {base} * {n}"]
    elif choice == 5:
        lines = [f"{it} = itertools.count({w.num(scope, 1)}, {w.rng.choice(['2', '0.5', '-1'])})",
                 f"{n} = next({it}) + next({it}) * 2", f"{n} = {n} + next({it})"]
    elif choice == 6:
        lines = [f"{t} = list(itertools.accumulate({lst} + [{base}], torch.maximum))[-1]",
                 f"{n} = list(itertools.accumulate([{_nums(w, scope)}], operator.mul, initial=2))[-1]"]
    elif choice == 7:
        lines = [f"{n} = sum(itertools.compress([{_nums(w, scope, 4)}], [1, 0, 1, 1])) + "
                 f"len(list(itertools.filterfalse(lambda v_: v_ > 1, [{_nums(w, scope)}])))"]
    else:
        lines = [f"{it} = itertools.chain({lst}, [{base}])", f"{t} = next({it})",
                 f"{t} = {t} + sum({it}, {base} * 0)"]
    for line in lines:
        if line.startswith(f"{t} ="):
            scope.define(t, "tensor")
        if line.startswith(f"{n} ="):
            scope.define(n, "num")
    return lines


@statement("operator_state", 1.5)
def operator_state(w, scope, depth):
    """``operator``'s functions that change or read state: ``iadd``/``setitem``/``delitem`` on lists and dicts
    (the arguments' too), ``methodcaller`` of a mutating method, ``attrgetter`` of several and dotted names,
    ``itemgetter`` of a slice; the changed container is read back."""
    tensors = scope.of("tensor")
    lists = [n for n in scope.of("list") if n not in scope.frozen]
    if not tensors:
        return None
    define_imports(w)
    t, n = w.fresh("t"), w.fresh("n")
    base = w.rng.choice(tensors)
    choice = w.rng.randrange(6)
    if choice == 0 and lists:
        lst, r = w.rng.choice(lists), w.fresh("lst")
        lines = [f"{r} = operator.iadd({lst}, [{w.tensor(scope)}])", f"{n} = ({r} is {lst}) + len({lst})",
                 f"{t} = {lst}[-1] * {n}"]
    elif choice == 1 and "d" in scope.names and "d" not in scope.frozen:
        lines = [f"operator.setitem(d, 'k2', {w.tensor(scope)})", f"{t} = operator.getitem(d, 'k2') + {base}",
                 f"{n} = operator.contains(d, 'k2') + len(d)"]
        if w.rng.random() < 0.5:
            lines.append("operator.delitem(d, 'k2')")
    elif choice == 2 and "obj" in scope.names:
        lines = [f"{t}, {n} = operator.attrgetter('w', 'count')(obj)", f"{t} = {t} * {n} + {base}",
                 f"{n} = {n} + operator.attrgetter('w.shape')(obj)[0]"]
    elif choice == 3 and "xs" in scope.names:
        lines = [f"{t} = sum(operator.itemgetter(slice(0, 2))(xs), {base} * 0)",
                 f"{n} = len(operator.itemgetter(slice(1, None))(xs))"]
    elif choice == 4 and lists:
        lst = w.rng.choice(lists)
        lines = [f"operator.methodcaller('append', {w.tensor(scope)})({lst})",
                 f"{n} = len(operator.methodcaller('copy')({lst})) + len({lst})", f"{t} = {lst}[-1] + {base}"]
    elif choice == 5 and "obj" in scope.names and "obj" not in scope.frozen:
        lines = [f"operator.setitem(obj.log, slice(0, 0), [{w.num(scope, 1)}])",
                 f"{n} = operator.getitem(obj.log, 0) + len(obj.log)", f"{t} = {base} * len(obj.log)"]
    else:
        lines = [f"{n} = operator.methodcaller('get', 'n', 0)(d) if isinstance(d, dict) else 0" if "d" in scope.names
                 else f"{n} = operator.index(2)", f"{t} = operator.mul({base}, {n}) + operator.neg({w.tensor(scope)})"]
    scope.define(t, "tensor")
    scope.define(n, "num")
    return lines
