"""Corners of Python's semantics an engine may fold wrongly: equal keys, NaN, signed zero, rounding, guards."""
import math

import torch

from . import construct


def xn(n):
    return lambda: (torch.randn(4), n)


def xs(s):
    return lambda: (torch.randn(4), s)


@construct()
def equal_keys_merge(x):
    d = {1: "a", True: "b", 1.0: "c"}  # noqa: F601 (the construct: equal keys merge)
    return x + len(d), d, list(d)[0] is True


@construct()
def equal_members_set(x):
    s = {1, True, 1.0, 0, False}
    return x * len(s), sorted(s)


@construct()
def hash_collision_minus_one(x):
    s = {-1, -2, 3}
    return list(s), x + (hash(-1) == hash(-2))


@construct()
def nan_identity_in_list(x):
    nan = float("nan")
    return x + (nan in [nan]) + (nan == nan) * 2 + ([nan] == [nan]) * 4


@construct()
def nan_truth_and_compare(x):
    nan = float("nan")
    return x + bool(nan) + (nan < 1) * 2 + (nan != nan) * 4, math.isnan(nan)


@construct()
def signed_zero(x):
    z = -0.0
    return x * z, repr(z), repr(abs(z)), math.copysign(1.0, z), {0.0: "a"}[z], z == 0.0


@construct()
def bankers_rounding(x):
    return x + round(2.5) + round(3.5) * 10, round(-0.5), round(0.125, 2), round(7, -1)


@construct()
def floor_division_negative(x):
    return x * (-7 // 2) + (-7 % 3), divmod(-7, 2), math.fmod(-7, 3), -7 / 2, int(-2.5)


@construct()
def float_repr_precision(x):
    return x + 1, f"{0.1 + 0.2}", str(1e16), repr(1 / 3), 0.1 + 0.2 == 0.3, str(2.0), str(1e-5)


@construct()
def big_integers(x):
    n = 2 ** 100
    return x + (n % 7), n // 3, str(n)[-5:], hash(2 ** 61) == hash(1), (-n) >> 98


@construct()
def bool_arithmetic(x):
    return x * (True + True), True * 3, -True, ~True, True / 2, type(True & True).__name__


@construct()
def and_or_return_operands(x):
    return x + 1, 0 or "x", [] and 5, "" or [] or 0, 3 and "y", None or 0.0


@construct()
def chained_compare_evaluates_once(x):
    log = []

    def mid():
        log.append("mid")
        return 2

    return x * (1 < mid() < 3), log


@construct()
def tensor_times_bool(x):
    return x * True, x + False, (x > 0) * 2.5, (x > 0) + True


@construct()
def true_division_ints(x):
    n = x.shape[0]
    return x * (n / 3), n / 2, type(n / 2).__name__, 7 // 2.0


@construct()
def power_edge_cases(x):
    return x + 2 ** -1, (-8) ** (1 / 3) == (-8) ** (1 / 3), 0 ** 0, pow(3, -1, 7), 10 ** 20


@construct()
def format_specs_more(x):
    return x + 1, f"{3:+d}|{1234567:,}|{0.000123:e}|{12.5:g}|{5:b}|{255:#x}|{3.0:.0f}|{-1.5:08.2f}"


@construct()
def format_builtin_and_percent(x):
    return x + 1, format(0.5, ".1%"), "%5.1f%%" % 12.345, "%x|%o|%e" % (255, 8, 1234.5), "%-4s|" % "a"


@construct()
def fstring_of_tensor_shape(x):
    return x + 1, f"{x.shape}", str(x.dtype), f"{x.dtype}", repr(x.shape), str(x.device)


@construct()
def str_split_whitespace(x):
    return x + 1, " a  b\tc\n".split(), "a,b".split(",", 0), "".split(","), "  x ".strip(), "a-b-c".rsplit("-", 1)


@construct()
def int_parsing(x):
    return x * int("  7 "), int("0x1f", 0), int("-0"), float(" 1e3 "), int(True), float("inf") > 1e308


@construct()
def slicing_bounds(x):
    xs = [1, 2, 3, 4, 5]
    return x + 1, xs[::-1][5:], xs[-100:2], xs[3:1], xs[::-2], xs[1:100:3], "abcdef"[-2::-2]


@construct()
def index_with_start(x):
    xs = [1, 2, 1, 2]
    return x * xs.index(1, 1), "abcabc".find("b", 2), "abcabc".rindex("a")


@construct()
def sorted_stability(x):
    pairs = [("b", 1), ("a", 1), ("c", 0)]
    return x + 1, sorted(pairs, key=lambda p: p[1]), sorted(pairs, key=lambda p: p[1], reverse=True)


@construct()
def max_min_ties(x):
    pairs = [("a", 2), ("b", 2), ("c", 1)]
    return x + 1, max(pairs, key=lambda p: p[1]), min(pairs, key=lambda p: -p[1]), max("ab", "b", key=len)


@construct()
def float_sum_precision(x):
    return x + 1, sum([0.1] * 10), math.fsum([0.1] * 10), sum([1, 2.5]), sum([], 0.0)


@construct()
def compare_sequences(x):
    return x + 1, (1, 2) < (1, 2, 0), [2] > [1, 9], "B" < "a", "abc" < "abd", (1, "a") == (1.0, "a")


@construct()
def truthiness_of_containers(x):
    return x * (bool([]) + (not ()) * 2 + bool({0}) * 4 + bool("0") * 8 + bool(range(0)) * 16)


@construct()
def range_object_ops(x):
    r = range(10)[-3:]
    return x * len(r), list(r), r.index(8), range(0, 10, 3)[-1], 3 in range(0, 10, 3)


@construct()
def dict_from_zip_and_enumerate(x):
    d = dict(zip("abc", range(3)))
    e = dict(enumerate("xy", start=-1))
    return x * d["c"], d, e


@construct()
def list_multiply_negative(x):
    return x + 1, [1] * -1, "ab" * 0, [[0]] * 2, (1,) * 3


@construct()
def nested_list_aliasing_multiply(x):
    grid = [[0] * 2] * 2
    grid[0][0] = 5
    return x * grid[1][0], grid


@construct()
def string_identity_free_compare(x):
    a = "".join(["ab", "c"])
    return x + (a == "abc"), a


@construct(xn(3), other=xn(5))
def int_argument_guarded(x, n):
    return x * n + n ** 2


@construct(xn(2), other=xn(-2))
def int_argument_sign_branch(x, n):
    return x * n if n > 0 else x - n


@construct(xn(3), other=xn(3.5))
def int_or_float_argument(x, n):
    return x * n, type(n).__name__, n / 2


@construct(xs("relu"), other=xs("tanh"))
def str_argument_guarded(x, mode):
    return torch.relu(x) if mode == "relu" else torch.tanh(x), mode.upper()


@construct(lambda: (torch.randn(4), [1, 2]), other=lambda: (torch.randn(4), [1, 2, 3]))
def list_length_guarded(x, xs):
    return x * len(xs), sum(xs)


@construct(lambda: (torch.randn(4), {"a": 1}), other=lambda: (torch.randn(4), {"a": 1, "b": 2}))
def dict_keys_guarded(x, d):
    return x * len(d), sorted(d), "b" in d


@construct(lambda: (torch.randn(4), None), other=lambda: (torch.randn(4), torch.ones(4)))
def optional_argument(x, mask):
    return x + 1 if mask is None else x * mask


@construct(lambda: (torch.randn(4), (1, 2)), other=lambda: (torch.randn(4), (2, 1)))
def tuple_values_guarded(x, t):
    a, b = t
    return x * a - b


@construct(lambda: (torch.randn(4), True), other=lambda: (torch.randn(4), 1))
def bool_vs_int_argument(x, flag):
    return x * 2 if flag is True else x * 3, type(flag).__name__


@construct(lambda: (torch.randn(4), 0.0), other=lambda: (torch.randn(4), -0.0))
def signed_zero_argument(x, z):
    return x + math.copysign(1.0, z), repr(z)


@construct(lambda: (torch.randn(4),), other=lambda: (torch.randn(6),))
def shape_guarded(x):
    return x.reshape(2, -1) if x.shape[0] == 4 else x * 2


@construct(lambda: (torch.randn(4),), other=lambda: (torch.randn(4).double(),))
def dtype_guarded(x):
    return x * 2 if x.dtype == torch.float32 else x - 1, str(x.dtype)


# -- equality and membership across types ------------------------------------------------------------------
def bits(*flags):
    """Booleans as one int (bit i for flag i), so that one wrong comparison shows which."""
    return sum(int(bool(f)) << i for i, f in enumerate(flags))


@construct()
def equality_sequences_across_types(x):
    return x + bits([1] == [1.0], (1,) == [1], [] == (), (1, 2) == (1, 2.0), [[1]] == [[True]], "a" == b"a")


@construct()
def equality_sets_across_types(x):
    return x + bits({1, 2} == frozenset([2, 1]), frozenset() == set(), {1} == {1.0}, {1: 2} == {1.0: 2},
                    {1, 2} == [1, 2])


@construct()
def equality_views(x):
    d = {"a": 1, "b": 2}
    return x + bits(d.keys() == {"a", "b"}, d.items() == {("a", 1), ("b", 2)}, d.values() == d.values(),
                    d.keys() == ["a", "b"], list(d.values()) == [1, 2])


@construct()
def equality_ranges_and_none(x):
    return x + bits(range(3) == range(0, 3), range(0) == range(5, 2), range(3) == [0, 1, 2], None == 0,
                    None is None, 0 == False, 1.0 == True)


@construct()
def equality_records_across_types(x):
    import collections

    P = collections.namedtuple("P", "a b")
    return x + bits(P(1, 2) == (1, 2), P(1, 2) == [1, 2], collections.Counter(a=1) == {"a": 1},
                    collections.OrderedDict(a=1, b=2) == collections.OrderedDict(b=2, a=1))


@construct()
def equality_size_and_tuples(x):
    return x + bits(x.shape == (4,), x.shape == [4], x.shape == torch.Size([4]), tuple(x.shape) == (4,),
                    x.shape[0] == 4.0)


@construct()
def membership_across_types(x):
    d = {"a": 1}
    return x + bits(1.0 in [1], True in {1: "x"}, "a" in d.keys(), 1 in d.values(), ("a", 1) in d.items(),
                    [1] in [[1.0]], 2 in range(0, 4, 2), 3 in range(0, 4, 2), "b" in "abc", "" in "abc")


@construct()
def ordering_across_types(x):
    return x + bits(1 < 1.5, True < 2, (1, 2) < (1, 2.5), [1] < [1, 0], "Z" < "a", 2 ** 64 > 1.8e19,
                    frozenset([1]) < {1, 2}, {1} <= {1})
