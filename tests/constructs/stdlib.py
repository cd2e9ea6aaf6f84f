"""The standard library: functools, itertools, operator, collections."""
import collections
import copy
import functools
import itertools
import math
import operator

import torch

from . import construct, xy


def scale(t, k=1, *, shift=0):
    return t * k + shift


def logged(fn):
    @functools.wraps(fn)
    def inner(*args, **kwargs):
        return fn(*args, **kwargs) + 1
    return inner


@logged
def decorated(t):
    """Doc."""
    return t * 2


@functools.lru_cache(maxsize=None)
def table(n):
    return tuple(range(n))


class Model:
    def __init__(self, t):
        self.t = t

    @functools.cached_property
    def heavy(self):
        return self.t * 10


# -- functools ----------------------------------------------------------------------------------------------
@construct()
def partial_call(x):
    f = functools.partial(scale, k=3)
    return f(x) + f(x, shift=1)


@construct()
def partial_positional(x):
    f = functools.partial(torch.add, x)
    return f(1) + f(x)


@construct()
def partial_attributes(x):
    f = functools.partial(scale, k=2)
    return x * f.keywords["k"], f.func is scale, f.args


@construct()
def partial_of_partial(x):
    f = functools.partial(functools.partial(scale, k=2), shift=5)
    return f(x)


@construct()
def reduce_add(x):
    return functools.reduce(operator.add, [x, x * 2, x * 3])


@construct()
def reduce_lambda_initial(x):
    return functools.reduce(lambda acc, t: acc * t, [1, 2, 3], x)


@construct()
def wraps_decorator(x):
    return decorated(x), decorated.__name__, decorated.__doc__


@construct()
def wraps_in_function(x):
    def deco(fn):
        @functools.wraps(fn)
        def inner(t):
            return fn(t) * 2
        return inner

    @deco
    def g(t):
        return t + 1

    return g(x), g.__name__, g.__wrapped__(x)


@construct()
def lru_cache_of_constants(x):
    return x * len(table(4)) + sum(table(3))


@construct()
def cached_property_read(x):
    m = Model(x)
    return m.heavy + m.heavy


@construct()
def singledispatch_call(x):
    @functools.singledispatch
    def f(v):
        return 0

    @f.register
    def _(v: int):
        return v * 2

    return x * f(3) + f("s")


@construct()
def cmp_to_key_sort(x):
    order = sorted([3, 1, 2], key=functools.cmp_to_key(lambda a, b: b - a))
    return x * order[0], order


# -- itertools -------------------------------------------------------------------------------------------------
@construct(xy)
def chain_lists(x, y):
    return list(itertools.chain([x], [y, x * 2]))


@construct(xy)
def chain_from_iterable(x, y):
    return sum(itertools.chain.from_iterable([[x, y], [x]]))


@construct()
def product_loops(x):
    return [x * i + j for i, j in itertools.product(range(2), range(3))]


@construct()
def product_repeat(x):
    return x * len(list(itertools.product([0, 1], repeat=3)))


@construct(xy)
def combinations_pairs(x, y):
    return [a * b for a, b in itertools.combinations([x, y, x + y], 2)]


@construct()
def permutations_count(x):
    return x * len(list(itertools.permutations(range(3)))), list(itertools.permutations("ab"))


@construct()
def accumulate_tensors(x):
    return list(itertools.accumulate([x, x, x]))


@construct()
def accumulate_func(x):
    return x * list(itertools.accumulate([1, 2, 3], operator.mul))[-1]


@construct()
def count_zip(x):
    return [x * i for i, _ in zip(itertools.count(1, 2), range(3))]


@construct()
def islice_count(x):
    return [x + i for i in itertools.islice(itertools.count(), 2, 5)]


@construct()
def repeat_zip(x):
    return [a * b for a, b in zip(itertools.repeat(x), [1, 2, 3])]


@construct(xy)
def zip_longest_fill(x, y):
    return [a + b for a, b in itertools.zip_longest([x, y, x], [y], fillvalue=0)]


@construct()
def groupby_keys(x):
    groups = [(k, len(list(g))) for k, g in itertools.groupby("aabbbc")]
    return x * groups[1][1], groups


@construct()
def starmap_pow(x):
    return x * sum(itertools.starmap(pow, [(2, 3), (3, 2)]))


@construct()
def pairwise_diffs(x):
    return [b - a for a, b in itertools.pairwise([x, x * 2, x * 4])]


@construct()
def takewhile_dropwhile(x):
    xs = [1, 2, 5, 1]
    return x * sum(itertools.takewhile(lambda v: v < 3, xs)) + sum(itertools.dropwhile(lambda v: v < 3, xs))


@construct()
def compress_cycle(x):
    c = itertools.cycle([1, 2])
    return x * (next(c) + next(c) + next(c)) + sum(itertools.compress([1, 2, 3], [1, 0, 1]))


# -- operator ----------------------------------------------------------------------------------------------------
@construct(xy)
def operator_functions(x, y):
    return operator.add(x, y) * operator.mul(2, 3) - operator.neg(y) + operator.truediv(x, 2)


@construct()
def operator_itemgetter(x):
    pairs = [(x, 3), (x * 2, 1)]
    return sorted(pairs, key=operator.itemgetter(1))[0][0] + operator.itemgetter(0, 2)([1, 2, 3])[1]


@construct()
def operator_attrgetter(x):
    return operator.attrgetter("shape")(x)[0] * x, operator.attrgetter("real.shape")(x)


@construct()
def operator_methodcaller(x):
    return operator.methodcaller("mul", 3)(x), operator.methodcaller("split", ",")("a,b")


@construct()
def operator_compare_truth(x):
    return x + operator.lt(1, 2) + operator.eq("a", "a") * 2 + operator.truth([]) * 4 + operator.not_(0) * 8


@construct()
def operator_inplace(x):
    y = x.clone()
    y = operator.iadd(y, 1)
    return operator.imul(y, 2), operator.getitem([1, 2, 3], 1), operator.contains([1, 2], 2)


@construct()
def operator_index_setitem(x):
    d = {}
    operator.setitem(d, "a", x)
    operator.delitem(d, "a")
    return x * operator.index(3), len(d)


# -- collections -----------------------------------------------------------------------------------------------
@construct()
def ordereddict_ops(x):
    d = collections.OrderedDict()
    d["b"] = x
    d["a"] = x * 2
    d.move_to_end("b")
    return list(d.keys()), d["a"] + d["b"]


@construct()
def ordereddict_popitem_last(x):
    d = collections.OrderedDict(a=1, b=2, c=3)
    k, v = d.popitem(last=False)
    return x * v, k, list(d)


@construct()
def defaultdict_list(x):
    d = collections.defaultdict(list)
    d["a"].append(x)
    d["a"].append(x * 2)
    d["b"].append(x * 3)
    return sum(d["a"]) + d["b"][0], len(d)


@construct()
def defaultdict_int_counting(x):
    d = collections.defaultdict(int)
    for w in "abca":
        d[w] += 1
    return x * d["a"], dict(d)


@construct()
def defaultdict_lambda(x):
    d = collections.defaultdict(lambda: 5)
    return x * d["missing"], "missing" in d


@construct()
def deque_ops(x):
    q = collections.deque([1, 2], maxlen=3)
    q.append(3)
    q.append(4)
    q.appendleft(0)
    return x * q.pop() + q.popleft(), list(q)


@construct()
def deque_of_tensors(x):
    q = collections.deque()
    q.append(x)
    q.append(x * 2)
    q.rotate(1)
    return q[0] - q[1], len(q)


@construct()
def counter_most_common(x):
    c = collections.Counter("abracadabra")
    return x * c["a"], c.most_common(2)


@construct()
def counter_update_arith(x):
    c = collections.Counter(a=1)
    c.update(["a", "b"])
    c2 = c + collections.Counter(b=5)
    return x * c2["b"] + c["zzz"], sorted(c2.elements())


@construct()
def chainmap_lookup(x):
    defaults = {"lr": 1, "wd": 2}
    m = collections.ChainMap({"lr": 5}, defaults)
    return x * m["lr"] + m["wd"], len(m), dict(m)


@construct()
def namedtuple_from_collections(x):
    P = collections.namedtuple("P", "a b")
    return P(x, 2)._replace(b=4).b * x


# -- more of the same families --------------------------------------------------------------------------------
WRITTEN = 0


@construct()
def functools_cache_constants(x):
    @functools.cache
    def fib(n):
        return n if n < 2 else fib(n - 1) + fib(n - 2)

    return x * fib(10)


@construct()
def filterfalse_and_zip_longest_default(x):
    odd = list(itertools.filterfalse(lambda v: v % 2 == 0, range(6)))
    return x * sum(odd), list(itertools.zip_longest("ab", "c"))


@construct()
def ordereddict_equality_is_ordered(x):
    a = collections.OrderedDict([("a", 1), ("b", 2)])
    b = collections.OrderedDict([("b", 2), ("a", 1)])
    return x + (a == b) + (dict(a) == dict(b)) * 2 + (a == dict(b)) * 4


@construct()
def counter_subtract_and_total(x):
    c = collections.Counter(a=3, b=1)
    c.subtract({"a": 1, "b": 2})
    return x * c["a"], +c, c.total()


@construct()
def chainmap_new_child_writes(x):
    base = {"a": 1}
    child = collections.ChainMap(base).new_child({"b": 2})
    child["a"] = 10
    return x * child["a"] + base["a"], dict(child.maps[0])


@construct()
def deque_extendleft_maxlen(x):
    q = collections.deque([1], maxlen=3)
    q.extendleft([2, 3, 4])
    return x * q[0], list(q), q.maxlen


@construct()
def math_integer_functions(x):
    return x * math.gcd(12, 18) + math.lcm(4, 6), math.comb(5, 2), math.perm(4, 2), math.isqrt(17), math.factorial(5)


@construct()
def math_float_functions(x):
    return (x * math.hypot(3, 4), math.trunc(-2.7), math.exp(0), math.log2(8), math.inf > 1e300,
            math.dist((0, 0), (3, 4)))


@construct()
def copy_user_object(x):
    class P:
        def __init__(self, t):
            self.t = t
            self.tags = ["a"]

    p = P(x)
    q = copy.copy(p)
    q.tags.append("b")
    return q.t * 2, p.tags, q is p


@construct()
def deepcopy_list_of_tensors(x):
    xs = [x, [x]]
    ys = copy.deepcopy(xs)
    return ys[0] + ys[1][0], ys[0] is xs[0], ys[1][0] is ys[0]


@construct()
def vars_without_arguments(x):
    a, b = 1, 2
    names = sorted(k for k in vars() if k in ("a", "b", "x"))
    return x * (a + b), names


@construct()
def globals_write(x):
    globals()["WRITTEN"] = 5
    return x * WRITTEN


@construct()
def hasattr_on_tensor_and_module(x):
    return x + hasattr(x, "shape") + hasattr(x, "nope") * 2 + hasattr(math, "pi") * 4


@construct()
def operator_length_hint_and_concat(x):
    return x * operator.length_hint([1, 2, 3]), operator.concat([1], [2]), operator.pow(2, 5)


@construct()
def mapping_equality_across_types(x):
    a = collections.OrderedDict([("a", 1), ("b", 2)])
    d = collections.defaultdict(int, {"a": 1})
    return x + (a == {"b": 2, "a": 1}) + (d == {"a": 1}) * 2 + ({"a": 1, "b": 2} == {"b": 2, "a": 1}) * 4
