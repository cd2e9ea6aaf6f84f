"""Constructs live across a graph break: each program reads a tensor's value (``t.item()``), a break for both engines.

These programs are not one graph for either engine by design; they check that what was made before
the break (iterators, generators, objects, cells, handlers, context managers) is the same object with
the same state after it.
"""
import collections
import contextlib
import dataclasses
import functools
import itertools

import torch

from . import construct


def value(t):
    """A Python float read from a tensor: the graph break."""
    return t.sum().item()


class Box:
    def __init__(self, t):
        self.t = t
        self.n = 0

    def bump(self):
        self.n += 1
        return self


class Tracked:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, *exc):
        self.log.append(f"exit {exc[0].__name__ if exc[0] else None}")
        return False


class Added:
    def __init__(self, t):
        self.t = t

    def __add__(self, other):
        return Added(self.t + value(other.t) * 0 + other.t)


class Base:
    def f(self, t):
        return t + value(t) * 0 + 1


class Sub(Base):
    def f(self, t):
        return super().f(t) * 2


class Prop:
    def __init__(self, t):
        self._t = t

    @property
    def doubled(self):
        return self._t * 2 + value(self._t) * 0


@dataclasses.dataclass(eq=False)
class Rec:
    t: torch.Tensor
    k: int = 2


@contextlib.contextmanager
def tagged(log):
    log.append("in")
    yield
    log.append("out")


@construct()
def iterator_across_break(x):
    it = iter([1, 2, 3])
    a = next(it)
    v = value(x)
    return x * (a + next(it)) + v * 0, list(it)


@construct()
def generator_across_break(x):
    def gen():
        for i in range(4):
            yield x * i

    g = gen()
    first = next(g)
    v = value(x)
    return first + v * 0, list(g)


@construct()
def zip_across_break(x):
    z = zip([1, 2, 3], "abc")
    first = next(z)
    v = value(x)
    return x * first[0] + v * 0, list(z)


@construct()
def map_across_break(x):
    m = map(lambda k: x * k, [1, 2, 3])
    first = next(m)
    v = value(x)
    return first + v * 0, list(m)


@construct()
def enumerate_across_break(x):
    e = enumerate("abc", 1)
    next(e)
    v = value(x)
    return x + v * 0, list(e)


@construct()
def count_across_break(x):
    c = itertools.count(5)
    next(c)
    v = value(x)
    return x * next(c) + v * 0


@construct()
def object_across_break(x):
    b = Box(x)
    b.bump()
    v = value(x)
    b.bump()
    return b.t * b.n + v * 0, b.n


@construct()
def object_alias_across_break(x):
    b = Box(x)
    same = [b, b]
    v = value(x)
    same[0].bump()
    return x + v * 0, same[1].n, same[0] is same[1]


@construct()
def list_alias_across_break(x):
    a = [1]
    b = a
    v = value(x)
    b.append(2)
    return x * len(a) + v * 0, a is b


@construct()
def dict_view_across_break(x):
    d = {"a": 1}
    keys = d.keys()
    v = value(x)
    d["b"] = 2
    return x * len(keys) + v * 0, list(keys)


@construct()
def set_across_break(x):
    s = {1, 2}
    v = value(x)
    s.add(3)
    return x * len(s) + v * 0, sorted(s)


@construct()
def deque_across_break(x):
    q = collections.deque([1, 2])
    q.append(3)
    v = value(x)
    q.appendleft(0)
    return x * q[0] + v * 0 + q[-1], list(q)


@construct()
def defaultdict_across_break(x):
    d = collections.defaultdict(list)
    d["a"].append(1)
    v = value(x)
    d["b"].append(2)
    return x * len(d) + v * 0, dict(d)


@construct()
def counter_across_break(x):
    c = collections.Counter("aab")
    v = value(x)
    c.update("b")
    return x * c["b"] + v * 0, sorted(c.items())


@construct()
def partial_across_break(x):
    f = functools.partial(torch.mul, other=3)
    v = value(x)
    return f(x) + v * 0


@construct()
def namedtuple_across_break(x):
    P = collections.namedtuple("P", "a b")
    p = P(x, 2)
    v = value(x)
    return p.a * p.b + v * 0, p._replace(b=5).b


@construct()
def dataclass_across_break(x):
    r = Rec(x)
    v = value(x)
    r.k = 4
    return r.t * r.k + v * 0


@construct()
def closure_cell_across_break(x):
    n = 1

    def bump():
        nonlocal n
        n += 1

    bump()
    v = value(x)
    bump()
    return x * n + v * 0


@construct()
def user_with_across_break(x):
    log = []
    with Tracked(log):
        v = value(x)
        y = x * 2 + v * 0
    return y, log


@construct()
def contextmanager_across_break(x):
    log = []
    with tagged(log):
        v = value(x)
    return x + v * 0, log


@construct()
def try_except_across_break(x):
    log = []
    try:
        v = value(x)
        raise KeyError("after break")
    except KeyError as e:
        log.append(str(e))
    return x + v * 0, log


@construct()
def finally_across_break(x):
    log = []
    try:
        v = value(x)
    finally:
        log.append("finally")
    return x + v * 0, log


@construct()
def exception_object_across_break(x):
    e = ValueError("made before")
    v = value(x)
    try:
        raise e
    except ValueError as caught:
        return x + v * 0, caught is e, str(caught)


@construct()
def loop_with_break_each_iteration(x):
    total = x
    for k in [1, 2, 3]:
        total = total + value(x) * 0 + k
    return total


@construct()
def while_loop_with_break(x):
    i, total = 0, x
    while i < 3:
        total = total * 2 + value(x) * 0
        i += 1
    return total, i


@construct()
def comprehension_with_break(x):
    return [x * k + value(x) * 0 for k in range(3)]


@construct()
def generator_expression_with_break(x):
    return sum(x * k + value(x) * 0 for k in range(3))


@construct()
def local_class_across_break(x):
    class K:
        def __init__(self, t):
            self.t = t

    k = K(x)
    v = value(x)
    return k.t + v * 0, type(k).__name__


@construct()
def super_method_with_break(x):
    return Sub().f(x)


@construct()
def property_with_break(x):
    return Prop(x).doubled


@construct()
def dunder_with_break(x):
    return (Added(x) + Added(x)).t


@construct()
def nested_calls_with_break(x):
    def inner(t):
        return t * 2 + value(t) * 0

    def outer(t):
        return inner(t) + 1

    return outer(x) * 3


@construct()
def sorted_with_key_and_break(x):
    items = [3, 1, 2]
    v = value(x)
    return x * sorted(items, key=lambda k: -k)[0] + v * 0


@construct()
def reversed_list_across_break(x):
    r = reversed([1, 2, 3])
    next(r)
    v = value(x)
    return x + v * 0, list(r)


@construct()
def print_across_break(x):
    print("before")
    v = value(x)
    print("after", v > -1000)
    return x + v * 0


@construct()
def global_write_across_break(x):
    global TOTAL
    TOTAL = 1
    v = value(x)
    TOTAL += 1
    return x * TOTAL + v * 0


TOTAL = 0


@construct()
def filter_across_break(x):
    f = filter(lambda k: k % 2, [1, 2, 3, 5])
    next(f)
    v = value(x)
    return x + v * 0, list(f)


@construct()
def chain_across_break(x):
    c = itertools.chain([1, 2], [3])
    next(c)
    v = value(x)
    return x + v * 0, list(c)


@construct()
def islice_across_break(x):
    s = itertools.islice(range(10), 1, 6, 2)
    next(s)
    v = value(x)
    return x + v * 0, list(s)


@construct()
def product_across_break(x):
    p = itertools.product([1, 2], "ab")
    next(p)
    v = value(x)
    return x + v * 0, list(p)


@construct()
def dict_items_iterator_across_break(x):
    it = iter({"a": 1, "b": 2, "c": 3}.items())
    next(it)
    v = value(x)
    return x + v * 0, list(it)


@construct()
def str_iterator_across_break(x):
    it = iter("abc")
    next(it)
    v = value(x)
    return x + v * 0, list(it)


@construct()
def range_iterator_across_break(x):
    it = iter(range(5))
    next(it)
    v = value(x)
    return x * next(it) + v * 0, list(it)


@construct()
def list_iterator_sees_append_after_break(x):
    xs = [1, 2]
    it = iter(xs)
    next(it)
    v = value(x)
    xs.append(3)
    return x + v * 0, list(it)


@construct()
def dict_grows_after_break_while_iterated(x):
    d = {"a": 1, "b": 2}
    it = iter(d)
    next(it)
    v = value(x)
    d["c"] = 3
    try:
        next(it)
    except RuntimeError as e:
        return x + v * 0, str(e)
    return x, "no error"


@construct()
def generator_send_across_break(x):
    def acc():
        total = 0
        while True:
            total += yield total

    g = acc()
    next(g)
    g.send(2)
    v = value(x)
    return x * g.send(3) + v * 0


@construct()
def map_two_iterators_across_break(x):
    m = map(lambda a, b: a * b, [1, 2, 3], [4, 5, 6])
    next(m)
    v = value(x)
    return x + v * 0, list(m)


@construct()
def zip_of_iterator_across_break(x):
    it = iter([1, 2, 3, 4])
    z = zip(it, it)
    next(z)
    v = value(x)
    return x + v * 0, list(z), list(it)
