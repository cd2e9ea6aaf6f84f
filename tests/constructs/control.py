"""Control constructs: match statements, comprehensions, closures, generators, lambdas, loops."""
import dataclasses

import torch

from . import construct, xy


@dataclasses.dataclass
class Op:
    kind: str
    k: float = 1.0


class Pt:
    __match_args__ = ("a", "b")

    def __init__(self, a, b):
        self.a = a
        self.b = b


# -- match ------------------------------------------------------------------------------------------------
@construct()
def match_literal(x, mode="relu"):
    match mode:
        case "tanh":
            return torch.tanh(x)
        case "relu":
            return torch.relu(x)
        case _:
            return x


@construct()
def match_or_pattern(x, n=3):
    match n:
        case 1 | 2:
            return x
        case 3 | 4:
            return x * 3
    return x * 0


@construct()
def match_sequence(x):
    match [x, x * 2, x * 3]:
        case [a]:
            return a
        case [a, *rest]:
            return a + len(rest)


@construct()
def match_mapping(x):
    match {"op": "scale", "k": 4, "extra": 1}:
        case {"op": "scale", "k": k, **rest}:
            return x * k + len(rest)
    return x


@construct()
def match_class_keyword(x):
    match Op("scale", 5.0):
        case Op(kind="shift", k=k):
            return x + k
        case Op(kind="scale", k=k):
            return x * k


@construct()
def match_class_positional(x):
    match Pt(2, 3):
        case Pt(a, b) if a > b:
            return x * a
        case Pt(a, b):
            return x * b


@construct()
def match_builtin_class(x, v=2.5):
    match v:
        case int():
            return x
        case float(f):
            return x * f


@construct()
def match_tuple_guard(x):
    match x.shape:
        case (n,) if n > 2:
            return x * n
        case _:
            return x


# -- comprehensions ----------------------------------------------------------------------------------------
@construct()
def list_comprehension_filter(x):
    return [x * i for i in range(5) if i % 2]


@construct()
def nested_comprehension(x):
    return [[x * i + j for j in range(2)] for i in range(2)]


@construct()
def comprehension_two_fors(x):
    return sum(x * i * j for i in range(3) for j in range(1, 3))


@construct(xy)
def comprehension_over_tensors(x, y):
    return torch.stack([a * b for a, b in zip(x, y)])


@construct()
def dict_comprehension_items(x):
    d = {"a": 1, "b": 2}
    return {k: x * v for k, v in d.items() if v > 1}


@construct()
def comprehension_uses_closure(x):
    k = 3
    return [x * k + i for i in range(2)]


# -- closures and lambdas -----------------------------------------------------------------------------------
@construct()
def closure_read(x):
    k = 2

    def f(t):
        return t * k

    return f(x)


@construct()
def closure_nonlocal_write(x):
    count = 0

    def bump():
        nonlocal count
        count += 1

    bump()
    bump()
    return x * count


@construct()
def closure_factory(x):
    def make(k):
        return lambda t: t * k

    return make(2)(x) + make(3)(x)


@construct()
def closures_in_loop(x):
    fs = [lambda t, i=i: t * i for i in range(3)]
    return [f(x) for f in fs]


@construct()
def closure_over_tensor(x):
    y = x.cos()

    def f(t):
        return t + y

    return f(x)


@construct()
def lambda_default_kwargs(x):
    f = lambda t, k=2, *, s=1: t * k + s  # noqa: E731
    return f(x) + f(x, 3, s=5)


@construct()
def star_args_kwargs(x):
    def f(*args, **kwargs):
        return sum(args) * kwargs.get("k", 1), sorted(kwargs)

    return f(x, x, k=3, j=1)


@construct()
def call_with_unpacking(x):
    def f(a, b, c=0):
        return a * b + c

    args = (x, 2)
    kwargs = {"c": 1}
    return f(*args, **kwargs)


@construct()
def recursion(x):
    def power(t, n):
        return t if n == 1 else t * power(t, n - 1)

    return power(x, 3)


@construct()
def decorator_in_function(x):
    def twice(fn):
        return lambda t: fn(fn(t))

    @twice
    def inc(t):
        return t + 1

    return inc(x)


# -- generators ----------------------------------------------------------------------------------------------
@construct()
def generator_list(x):
    def gen(t):
        for i in range(3):
            yield t * i

    return list(gen(x))


@construct()
def generator_sum(x):
    return sum(t * 2 for t in [x, x])


@construct()
def generator_yield_from(x):
    def inner(t):
        yield t
        yield t + 1

    def outer(t):
        yield from inner(t)
        yield t * 10

    return list(outer(x))


@construct()
def generator_send(x):
    def acc():
        total = 0
        while True:
            v = yield total
            total = total + v

    g = acc()
    next(g)
    g.send(1)
    return x * g.send(2)


@construct()
def generator_return_value(x):
    def inner():
        yield 1
        return 5

    def outer():
        v = yield from inner()
        yield v

    return x * sum(outer())


@construct()
def generator_zip_enumerate(x):
    def gen():
        yield x
        yield x * 2

    return [i * t for i, t in enumerate(gen())]


@construct()
def generator_early_exit(x):
    def gen():
        i = 0
        while True:
            yield i
            i += 1

    for v in gen():
        if v == 3:
            break
    return x * v


@construct()
def generator_next_manual(x):
    g = (t * 3 for t in [x, x + 1])
    return next(g) + next(g)


# -- loops ---------------------------------------------------------------------------------------------------
@construct()
def while_loop_counter(x):
    i = 0
    while i < 3:
        x = x * 2
        i += 1
    return x


@construct()
def for_else(x):
    for i in range(3):
        if i == 5:
            break
    else:
        x = x + 100
    return x


@construct()
def loop_over_tensor_rows(x):
    total = torch.zeros(())
    for row in x:
        total = total + row
    return total


@construct()
def global_mutation(x):
    global CALLS
    CALLS = 7
    return x * CALLS


CALLS = 0
