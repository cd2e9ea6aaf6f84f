"""Iteration order and laziness: what iterators consume, when side effects happen, short-circuits."""
import itertools

from . import construct


def noting(log):
    def note(v):
        log.append(v)
        return v
    return note


@construct()
def zip_consumes_extra(x):
    it = iter([1, 2, 3])
    pairs = list(zip(it, [10]))
    return x * next(it), pairs


@construct()
def map_lazy_order(x):
    log = []
    note = noting(log)
    m = map(note, [1, 2, 3])
    log.append("made")
    first = next(m)
    rest = list(m)
    return x * first, rest, log


@construct()
def any_short_circuit(x):
    log = []
    note = noting(log)
    found = any(note(v) > 1 for v in [1, 2, 3])
    return x + found, log


@construct()
def all_short_circuit(x):
    log = []
    note = noting(log)
    ok = all(note(v) < 2 for v in [1, 2, 3])
    return x + ok, log


@construct()
def sorted_key_calls(x):
    log = []
    order = sorted([3, 1, 2], key=noting(log))
    return x * order[0], log


@construct()
def min_of_generator_side_effects(x):
    log = []
    note = noting(log)
    return x * min(note(v) for v in [3, 1, 2]), log


@construct()
def list_iterator_sees_appends(x):
    xs = [1, 2]
    for v in xs:
        if v < 3:
            xs.append(v + 10)
    return x * len(xs), xs


@construct()
def iterator_shared_with_next(x):
    it = iter([1, 2, 3, 4, 5])
    pairs = []
    for a in it:
        pairs.append((a, next(it, None)))
    return x * len(pairs), pairs


@construct()
def generator_partially_consumed(x):
    def gen():
        for i in range(4):
            yield x * i

    g = gen()
    first = next(g)
    return first, list(g)


@construct()
def generator_side_effects_interleave(x):
    log = []

    def gen():
        for i in range(3):
            log.append(f"yield {i}")
            yield i

    for v in gen():
        log.append(f"got {v}")
    return x * len(log), log


@construct()
def generator_finally_on_exhaustion(x):
    log = []

    def gen():
        yield 1
        log.append("after")

    total = sum(gen())
    return x * total, log


@construct()
def generator_expression_binds_first_iterable(x):
    xs = [1, 2]
    g = (v * 2 for v in xs)
    xs = [10, 20]
    return x * sum(g), xs


@construct()
def reversed_after_mutation(x):
    xs = [1, 2, 3]
    r = reversed(xs)
    xs[0] = 100
    return x * next(r), list(r)


@construct()
def dict_changed_size_during_iteration(x):
    d = {"a": 1}
    try:
        for k in d:
            d[k + "x"] = 2
    except RuntimeError as e:
        return x + 1, str(e)
    return x, "no error"


@construct()
def enumerate_of_generator(x):
    def gen():
        yield x
        yield x * 2

    return [i + t for i, t in enumerate(gen(), 5)]


@construct()
def iter_callable_sentinel(x):
    counter = iter([1, 2, 3, 0, 5])
    values = list(iter(lambda: next(counter), 0))
    return x * sum(values), values


@construct()
def unpack_generator(x):
    def gen():
        yield x
        yield x + 1

    a, b = gen()
    return a * b


@construct()
def unpack_too_many_caught(x):
    try:
        a, _ = [x, x, x]
    except ValueError as e:
        return x + 1, str(e)
    return a


@construct()
def filter_generator_laziness(x):
    log = []
    note = noting(log)
    f = filter(lambda v: note(v) % 2, [1, 2, 3])
    first = next(f)
    return x * first, log


@construct()
def islice_consumes_exactly(x):
    it = iter(range(10))
    head = list(itertools.islice(it, 3))
    return x * next(it), head


@construct()
def chain_lazy(x):
    log = []
    note = noting(log)
    c = itertools.chain((note(v) for v in [1, 2]), (note(v) for v in [3]))
    return x * next(c), log


@construct()
def tee_iterators(x):
    a, b = itertools.tee([1, 2, 3])
    return x * (sum(a) + next(b)), list(b)


@construct()
def comprehension_scope_does_not_leak(x):
    i = 10
    ys = [i * 2 for i in range(3)]
    return x * i, ys


@construct()
def loop_variable_after_loop(x):
    for i in range(3):
        pass
    for j in []:
        pass
    return x * i, "j" in dir()


@construct()
def nested_loops_break_inner(x):
    pairs = []
    for i in range(3):
        for j in range(3):
            if j > i:
                break
            pairs.append((i, j))
    return x * len(pairs), pairs


@construct()
def while_with_else_and_break(x):
    n, log = 0, []
    while n < 5:
        n += 1
        if n == 3:
            log.append("break")
            break
    else:
        log.append("else")
    return x * n, log


@construct()
def zip_strict_mismatch_caught(x):
    try:
        list(zip([1, 2], [1], strict=True))
    except ValueError as e:
        return x + 1, str(e)
    return x
