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


def count(start=0, step=1):
    if not _is_number(start) or not _is_number(step):
        raise TypeError("a number is required")
    return _count(start, step)


def _is_number(value):
    return isinstance(value, (int, float, complex)) or hasattr(type(value), "__index__") \
        or hasattr(type(value), "__float__")


def _count(n, step):
    while True:
        yield n
        n += step


# The C iterators below call ``iter()`` on their inputs when they are made, not at the first ``next()``:
# each model does the same, then returns the generator doing the rest.
def cycle(iterable):
    return _cycle(iter(iterable))


def _cycle(iterator):
    saved = []
    for element in iterator:
        yield element
        saved.append(element)
    while saved:
        for element in saved:
            yield element


def takewhile(predicate, iterable):
    return _takewhile(predicate, iter(iterable))


def _takewhile(predicate, iterator):
    for item in iterator:
        if not predicate(item):
            return
        yield item


def dropwhile(predicate, iterable):
    return _dropwhile(predicate, iter(iterable))


def _dropwhile(predicate, iterator):
    for item in iterator:
        if not predicate(item):
            yield item
            break
    for item in iterator:
        yield item


def filterfalse(predicate, iterable):
    return _filterfalse(predicate, iter(iterable))


def _filterfalse(predicate, iterator):
    for item in iterator:
        if not (item if predicate is None else predicate(item)):
            yield item


def compress(data, selectors):
    return _compress(iter(data), iter(selectors))


def _compress(data, selectors):
    # CPython pulls a datum, then its selector; either running out ends it.
    while True:
        datum = next(data, _END)
        if datum is _END:
            return
        selector = next(selectors, _END)
        if selector is _END:
            return
        if selector:
            yield datum


def groupby(iterable, key=None):
    # The groupby and its groups share one state, as CPython's objects do: the current key and value
    # (``_END``: none), the key of the group being made, and the number of the live group (a group
    # made before the last ``next()`` of the groupby yields nothing more).
    return _groupby(iter(iterable), key, [_END, _END, _END, 0])


def _groupby(iterator, key, state):
    while True:
        state[3] += 1
        while state[0] is _END or (state[2] is not _END and _same_key(state[2], state[0])):
            if not _groupby_step(iterator, key, state):
                return
        state[2] = state[0]
        yield state[0], _grouper(iterator, key, state, state[3], state[2])


def _groupby_step(iterator, key, state):
    value = next(iterator, _END)
    if value is _END:
        return False
    new_key = value if key is None else key(value)
    state[1] = value
    state[0] = new_key
    return True


def _grouper(iterator, key, state, number, target):
    while state[3] == number:
        if state[1] is _END and not _groupby_step(iterator, key, state):
            return
        if not _same_key(target, state[0]):
            return
        value = state[1]
        state[1] = _END
        yield value


def _same_key(a, b):
    """``PyObject_RichCompareBool(a, b, Py_EQ)``: identity first, then ``==``."""
    if type(a) is tuple and type(b) is tuple:
        # Identical tuples are equal (their items are compared identity first): ``==`` alone is exact, and the
        # identity of tuples made in the trace is not known.
        return a == b
    return a is b or bool(a == b)


def tee(iterable, n=2):
    if n < 0:
        raise ValueError("n must be >= 0")
    iterator = iter(iterable)
    # Items pulled by the most advanced tee, shared: each tee reads them by its own position.
    buffer = []
    return tuple([_tee(iterator, buffer) for _ in range(n)])


def _tee(iterator, buffer):
    position = 0
    while True:
        if position == len(buffer):
            item = next(iterator, _END)
            if item is _END:
                return
            buffer.append(item)
        yield buffer[position]
        position += 1


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
                    "accumulate", "starmap", "zip_longest", "repeat", "count", "cycle", "takewhile",
                    "dropwhile", "filterfalse", "compress", "groupby", "tee")},
    "functools.reduce": (reduce, "the same loop in Python"),
    "_functools.reduce": (reduce, "the same loop in Python"),
}
