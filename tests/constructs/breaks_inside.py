"""A graph break inside a construct: in __init__, __eq__, key functions, handlers, __exit__, generators, match.

Each program reads a tensor's value (``t.item()``) somewhere inside the construct, a break for both
engines by design; the result, mutated inputs, globals and printed text must stay eager's.
"""
import contextlib
import functools

import torch

from . import construct

FLAG = 0


def value(t):
    """A Python float read from a tensor: the graph break."""
    return t.sum().item()


class Made:
    def __init__(self, t):
        self.before = t * 2
        self.v = value(t)
        self.after = self.before + 1


class Keyed:
    def __init__(self, t, k):
        self.t, self.k = t, k

    def __eq__(self, other):
        return self.k == other.k and value(self.t) * 0 == 0

    def __hash__(self):
        return hash(self.k)


class Setter:
    def __init__(self):
        self._v = None

    @property
    def v(self):
        return self._v

    @v.setter
    def v(self, t):
        self._v = t * 0 + value(t) * 0 + t


class ExitBreaks:
    def __init__(self, t, log):
        self.t, self.log = t, log

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.log.append(value(self.t) * 0)
        return False


class Bag:
    def __init__(self, t):
        self.t = t

    def __iter__(self):
        for k in range(3):
            yield self.t * k + value(self.t) * 0


@contextlib.contextmanager
def breaking_cm(t, log):
    log.append(value(t) * 0)
    yield
    log.append("exit")


@construct()
def break_in_init(x):
    m = Made(x)
    return m.after, m.before


@construct()
def break_in_eq_during_dict_lookup(x):
    d = {Keyed(x, 1): "one"}
    return x + 1, d[Keyed(x, 1)]


@construct()
def break_in_sort_key(x):
    items = [3, 1, 2]
    return x + 1, sorted(items, key=lambda k: k + value(x) * 0)


@construct()
def break_in_comprehension_condition(x):
    return [x * k for k in range(4) if k % 2 == 0 and value(x) * 0 == 0]


@construct()
def break_in_map_lambda(x):
    return list(map(lambda k: x * k + value(x) * 0, [1, 2]))


@construct()
def break_in_property_setter(x):
    s = Setter()
    s.v = x
    return s.v * 2


@construct()
def break_in_exit(x):
    log = []
    with ExitBreaks(x, log):
        y = x * 3
    return y, log


@construct()
def break_in_except_handler(x):
    try:
        raise KeyError("k")
    except KeyError as e:
        v = value(x)
        msg = str(e)
    return x + v * 0, msg


@construct()
def break_in_finally(x):
    log = []

    def f(t):
        try:
            return t + 1
        finally:
            log.append(value(t) * 0)

    return f(x), log


@construct()
def break_in_for_else(x):
    for k in range(2):
        x = x + k
    else:
        x = x + value(x) * 0 + 10
    return x


@construct()
def break_in_match_case(x, mode="scale"):
    match mode:
        case "scale":
            return x * 2 + value(x) * 0
        case _:
            return x


@construct()
def break_in_closure_nonlocal(x):
    total = 0

    def add(t):
        nonlocal total
        total += 1 + value(t) * 0

    add(x)
    add(x)
    return x * total


@construct()
def break_in_reduce_function(x):
    return functools.reduce(lambda a, b: a + b + value(b) * 0, [x, x, x])


@construct()
def break_in_contextmanager_before_yield(x):
    log = []
    with breaking_cm(x, log):
        y = x - 1
    return y, log


@construct()
def break_in_iter_generator_method(x):
    return list(Bag(x))


@construct()
def break_after_del_local(x):
    y = x * 2
    del y
    v = value(x)
    return x + v * 0, "y" in dir()


@construct()
def break_deep_with_star_args(x):
    def inner(*args, scale=1, **kw):
        return sum(args) * scale + value(args[0]) * 0 + len(kw)

    def outer(t, **kw):
        return inner(t, t, scale=2, **kw)

    return outer(x, extra=1)


@construct()
def break_in_recursion(x):
    def f(t, n):
        if n == 0:
            return t + value(t) * 0
        return f(t * 2, n - 1) + 1

    return f(x, 2)


@construct()
def break_while_global_rebound(x):
    global FLAG
    FLAG = 5
    v = value(x)
    FLAG = FLAG * 2
    return x * FLAG + v * 0


@construct()
def break_between_alias_writes(x):
    a = {"k": [1]}
    b = a["k"]
    b.append(2)
    v = value(x)
    a["k"].append(3)
    return x * len(b) + v * 0, a


@construct()
def break_in_dunder_bool(x):
    class B:
        def __bool__(self):
            return value(x) * 0 == 0

    return x + 1 if B() else x - 1


@construct()
def break_in_getattr_fallback(x):
    class L:
        def __getattr__(self, name):
            return x * len(name) + value(x) * 0

    return L().abc


@construct()
def break_inside_no_grad(x):
    with torch.no_grad():
        y = x * 2 + value(x) * 0
    return y, torch.is_grad_enabled()


@construct()
def break_in_generator_with_side_effects(x):
    log = []

    def gen():
        for k in range(3):
            log.append(f"gen {k}")
            yield x * k + value(x) * 0

    out = []
    for t in gen():
        log.append("consume")
        out.append(t)
    return out, log
