"""``itertools`` iterators and ``functools.reduce``, written in Python: traced lazily, as the C ones run.

Each model yields what the real iterator yields, pulling from its inputs in the
same order (side effects of generators it consumes interleave as in eager);
arguments outside what a model follows (``islice`` with a step below one, a
negative ``repeat``) raise the error the real one raises.
"""
from __future__ import annotations


#: What ``next(it, _END)`` returns once ``it`` is exhausted (never an item of user code).
_END = object()


def chain(*iterables):
    for iterable in iterables:
        yield from iterable


def chain_from_iterable(iterables):
    for iterable in iterables:
        yield from iterable


def islice(iterable, *bounds):
    if len(bounds) == 1:
        start, stop, step = 0, bounds[0], 1
    else:
        start, stop, step = (tuple(bounds) + (None,))[:3]
        start = 0 if start is None else start
        step = 1 if step is None else step
    if step < 1 or start < 0 or (stop is not None and stop < 0):
        raise ValueError("Indices for islice() must be None or an integer: 0 <= x <= sys.maxsize.")
    # CPython's islice_next: skip to the next index, stop *before* pulling the item at ``stop``.
    it = iter(iterable)
    count, target = 0, start
    while True:
        while count < target:
            if next(it, _END) is _END:
                return
            count += 1
        if stop is not None and count >= stop:
            return
        item = next(it, _END)
        if item is _END:
            return
        count += 1
        target += step
        if stop is not None and target > stop:
            target = stop
        yield item


def pairwise(iterable):
    iterator = iter(iterable)
    for previous in iterator:
        for item in iterator:
            yield previous, item
            previous = item
        return


def combinations(iterable, r):
    pool = tuple(iterable)
    n = len(pool)
    if r < 0:
        raise ValueError("r must be non-negative")
    if r > n:
        return
    indices = list(range(r))
    yield tuple(pool[i] for i in indices)
    while True:
        for i in reversed(range(r)):
            if indices[i] != i + n - r:
                break
        else:
            return
        indices[i] += 1
        for j in range(i + 1, r):
            indices[j] = indices[j - 1] + 1
        yield tuple(pool[i] for i in indices)


def product(*iterables, repeat=1):
    if repeat < 0:
        raise ValueError("repeat argument cannot be negative")
    pools = [tuple(pool) for pool in iterables] * repeat
    result = [()]
    for pool in pools:
        result = [x + (y,) for x in result for y in pool]
    for prod in result:
        yield prod


def permutations(iterable, r=None):
    pool = tuple(iterable)
    n = len(pool)
    r = n if r is None else r
    if r < 0:
        raise ValueError("r must be non-negative")
    for indices in product(range(n), repeat=r):
        if len(set(indices)) == r:
            yield tuple(pool[i] for i in indices)


def accumulate(iterable, func=None, *, initial=None):
    iterator = iter(iterable)
    total = initial
    if initial is None:
        for total in iterator:
            break
        else:
            return
    yield total
    for element in iterator:
        total = total + element if func is None else func(total, element)
        yield total


def starmap(function, iterable):
    for args in iterable:
        yield function(*args)


def zip_longest(*iterables, fillvalue=None):
    iterators = [iter(it) for it in iterables]
    active = len(iterators)
    if not active:
        return
    while True:
        values = []
        for i, iterator in enumerate(iterators):
            for value in iterator:
                break
            else:
                active -= 1
                if not active:
                    return
                iterators[i] = repeat(fillvalue)
                value = fillvalue
            values.append(value)
        yield tuple(values)


def repeat(obj, times=None):
    if times is None:
        while True:
            yield obj
    for _ in range(times):
        yield obj


def reduce(function, iterable, *initial):
    iterator = iter(iterable)
    if initial:
        (value,) = initial
    else:
        for value in iterator:
            break
        else:
            raise TypeError("reduce() of empty iterable with no initial value")
    for element in iterator:
        value = function(value, element)
    return value


#: What this file models, read by ``trace_rules``: dotted name -> (model, why the model is faithful).
MODELS = {
    **{f"itertools.{name}": (globals()[name.replace(".", "_")], "a generator yielding the same items")
       for name in ("chain", "chain.from_iterable", "islice", "pairwise", "combinations", "product", "permutations",
                    "accumulate", "starmap", "zip_longest", "repeat")},
    "functools.reduce": (reduce, "the same loop in Python"),
    "_functools.reduce": (reduce, "the same loop in Python"),
}
