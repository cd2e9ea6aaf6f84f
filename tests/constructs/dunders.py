"""Dunder methods of user objects: operators, comparisons, containers, truth, calls."""
import functools

from . import construct, xy


class Vec:
    def __init__(self, t):
        self.t = t

    def __add__(self, other):
        return Vec(self.t + (other.t if isinstance(other, Vec) else other))

    def __radd__(self, other):
        return Vec(other + self.t)

    def __sub__(self, other):
        return Vec(self.t - other.t)

    def __mul__(self, k):
        return Vec(self.t * k)

    def __rmul__(self, k):
        return Vec(self.t * k)

    def __neg__(self):
        return Vec(-self.t)

    def __matmul__(self, other):
        return (self.t * other.t).sum()

    def __iadd__(self, other):
        self.t = self.t + other.t
        return self

    def __getitem__(self, i):
        return self.t[i]

    def __setitem__(self, i, v):
        self.t = self.t.clone()
        self.t[i] = v

    def __len__(self):
        return self.t.shape[0]

    def __iter__(self):
        return iter(self.t.unbind(0))

    def __contains__(self, v):
        return v < self.t.shape[0]

    def __call__(self, k):
        return self.t ** k

    def __abs__(self):
        return Vec(self.t.abs())


class Tag:
    def __init__(self, name):
        self.name = name

    def __eq__(self, other):
        return isinstance(other, Tag) and self.name == other.name

    def __hash__(self):
        return hash(self.name)

    def __repr__(self):
        return f"Tag({self.name})"

    def __str__(self):
        return f"<{self.name}>"


@functools.total_ordering
class Rank:
    def __init__(self, r):
        self.r = r

    def __eq__(self, other):
        return self.r == other.r

    def __lt__(self, other):
        return self.r < other.r


class Flag:
    def __init__(self, on):
        self.on = on

    def __bool__(self):
        return self.on


class Sized:
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n


class Seq:
    """Iterable through __getitem__ alone (the old protocol)."""

    def __init__(self, items):
        self.items = items

    def __getitem__(self, i):
        return self.items[i]


class Index:
    def __index__(self):
        return 2


class Num:
    def __init__(self, v):
        self.v = v

    def __float__(self):
        return float(self.v)

    def __int__(self):
        return int(self.v)


@construct(xy)
def dunder_add(x, y):
    return (Vec(x) + Vec(y)).t


@construct()
def dunder_radd(x):
    return (1.5 + Vec(x)).t


@construct()
def dunder_sum_of_objects(x):
    return sum([Vec(x), Vec(x * 2)], Vec(x)).t


@construct(xy)
def dunder_sub_mul_neg(x, y):
    return (-(Vec(x) - Vec(y)) * 3).t + (2 * Vec(y)).t


@construct(xy)
def dunder_matmul(x, y):
    return Vec(x) @ Vec(y)


@construct(xy)
def dunder_iadd(x, y):
    v = Vec(x)
    v += Vec(y)
    return v.t


@construct()
def dunder_getitem(x):
    v = Vec(x)
    return v[0] + v[1:].sum()


@construct()
def dunder_setitem(x):
    v = Vec(x)
    v[1] = 100.0
    return v.t


@construct()
def dunder_len(x):
    return x * len(Vec(x))


@construct()
def dunder_iter(x):
    return [t * 2 for t in Vec(x)]


@construct()
def dunder_unpack(x):
    a, b, c, d = Vec(x)
    return a - d + b * c


@construct()
def dunder_contains(x):
    v = Vec(x)
    return x + (2 in v) + (9 in v) * 10


@construct()
def dunder_call(x):
    return Vec(x)(3)


@construct()
def dunder_abs(x):
    return abs(Vec(x)).t


@construct()
def dunder_eq_hash_dict_key(x):
    d = {Tag("a"): x, Tag("b"): x * 2}
    return d[Tag("b")] + (Tag("a") == Tag("a")) + (Tag("a") != Tag("c"))


@construct()
def dunder_hash_set(x):
    s = {Tag("a"), Tag("a"), Tag("b")}
    return x * len(s)


@construct()
def dunder_str_repr(x):
    t = Tag("q")
    return x + 1, str(t), repr(t), f"{t}/{t!r}"


@construct()
def dunder_total_ordering(x):
    return x + (Rank(1) < Rank(2)) + (Rank(3) >= Rank(2)) * 2 + (Rank(1) > Rank(5)) * 4


@construct()
def dunder_sorted_objects(x):
    ranks = sorted([Rank(3), Rank(1), Rank(2)])
    return x * ranks[0].r + ranks[-1].r


@construct()
def dunder_max_objects(x):
    return x * max([Rank(3), Rank(7), Rank(2)]).r


@construct()
def dunder_bool(x):
    return x + 1 if Flag(True) else x - 1


@construct()
def dunder_bool_not(x):
    return x * (not Flag(False)) + bool(Flag(True))


@construct()
def dunder_len_truth(x):
    return x + 1 if Sized(0) else x - 1


@construct()
def dunder_old_iteration(x):
    total = x
    for t in Seq([x, x * 2, x * 3]):
        total = total + t
    return total


@construct()
def dunder_index(x):
    return x[Index()] + [10, 20, 30][Index()]


@construct()
def dunder_float_int(x):
    return x * float(Num(2.5)) + int(Num(3.7))


@construct(xy)
def dunder_reflected_tensor(x, y):
    return (x + Vec(y)).t
