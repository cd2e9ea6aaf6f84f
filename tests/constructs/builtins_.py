"""Builtins: sets, dicts and views, list/tuple methods, str methods and formatting, iteration builtins."""
import copy
import math

import torch

from . import construct, x23, xy

SCALE = 3


def xn():
    return (torch.randn(4), 3)


def xl():
    return (torch.randn(4), [1, 2, 3])


def xd():
    return (torch.randn(4), {"a": 1, "b": 2})


# -- sets ---------------------------------------------------------------------------------------------
@construct()
def set_literal_len(x):
    return x * len({1, 2, 2, 3})


@construct()
def set_add_discard(x):
    s = set()
    s.add(1)
    s.add(2)
    s.discard(1)
    s.discard(7)
    return x + len(s), 2 in s


@construct()
def set_operators(x):
    a, b = {1, 2, 3}, {2, 3, 4}
    return x * len(a | b) + len(a & b) + len(a - b) * 10 + len(a ^ b) * 100


@construct()
def set_methods(x):
    a = {1, 2, 3}
    return x + a.issubset({1, 2, 3, 4}) + a.isdisjoint({9}) * 2 + len(a.union([7], (8,))) * 4


@construct()
def set_comprehension(x):
    s = {i % 3 for i in range(10)}
    return x * sum(s)


@construct()
def set_of_strings_membership(x, mode="train"):
    return x * 2 if mode in {"train", "fit"} else x


@construct()
def frozenset_ops(x):
    f = frozenset([1, 2]) | frozenset([3])
    return x * len(f), f == {1, 2, 3}


@construct()
def set_update_pop(x):
    s = {5}
    s.update([1, 2], {3})
    s.remove(5)
    return x * sum(s), sorted(s)


@construct()
def set_dedupe_list(x, items=(3, 1, 3, 2, 1)):
    return x * len(set(items)), sorted(set(items))


# -- dicts ----------------------------------------------------------------------------------------------
@construct(xd)
def dict_methods(x, d):
    d = dict(d)
    d.setdefault("c", 3)
    d.update(e=5)
    return x * d.get("c") + d.get("zz", 0) + d.pop("a"), sorted(d)


@construct(xd)
def dict_views(x, d):
    total = x
    for k, v in d.items():
        total = total + v
    return total, list(d.keys()), list(d.values())


@construct(xd)
def dict_key_in_view(x, d):
    return x + ("a" in d.keys()) + (2 in d.values()) * 2 + (("b", 2) in d.items()) * 4


@construct()
def dict_fromkeys(x):
    d = dict.fromkeys(["a", "b"], 0)
    d["a"] += 2
    return x * d["a"] + d["b"]


@construct()
def dict_comprehension(x):
    d = {f"k{i}": x * i for i in range(3)}
    return d["k2"] - d["k1"]


@construct(xd)
def dict_merge_operator(x, d):
    m = d | {"c": 10}
    return x * m["c"] + m["a"], list(m)


@construct()
def dict_of_tensors(x):
    d = {"a": x, "b": x.sin()}
    d["c"] = d["a"] + d["b"]
    del d["a"]
    return d


@construct(xd)
def dict_input_mutated(x, d):
    d["seen"] = True
    d.pop("b")
    return x + d["a"]


@construct()
def dict_popitem_copy(x):
    d = {"a": 1, "b": 2}
    e = d.copy()
    k, v = e.popitem()
    return x * v, k, d == {"a": 1, "b": 2}


@construct()
def dict_star_star(x):
    base = {"a": 1}
    merged = {**base, "b": 2, **{"c": 3}}
    return x * sum(merged.values())


@construct()
def dict_sorted_items(x):
    d = {"b": 2, "a": 1, "c": 3}
    return [x * v for _, v in sorted(d.items())]


# -- lists and tuples --------------------------------------------------------------------------------------
@construct()
def list_methods(x):
    xs = [3, 1, 2]
    xs.append(5)
    xs.insert(0, 9)
    xs.extend([7])
    xs.remove(1)
    return x * xs.pop() + xs.index(2) + xs.count(9), xs


@construct()
def list_sort_key(x):
    xs = ["ccc", "a", "bb"]
    xs.sort(key=len, reverse=True)
    return x * len(xs[0]), xs


@construct()
def list_sort_tensors_by_key(x):
    parts = [x * 3, x, x * 2]
    parts.sort(key=lambda t: t.shape[0])
    return parts


@construct()
def list_reverse_slice(x):
    xs = [x, x * 2, x * 3, x * 4]
    xs.reverse()
    return xs[::2], xs[1:-1]


@construct()
def list_slice_assign(x):
    xs = [1, 2, 3, 4]
    xs[1:3] = [x, x + 1]
    del xs[0]
    return xs


@construct()
def list_concat_repeat(x):
    return [x] * 2 + [x * 3]


@construct(xl)
def list_input_mutated(x, xs):
    xs.append(4)
    xs[0] = 100
    return x * len(xs)


@construct()
def tuple_methods(x):
    t = (1, 2, 2, 3)
    return x * t.count(2) + t.index(3), t + (4,), t * 2


@construct()
def list_compare(x):
    return x + ([1, 2] < [1, 3]) + ((1, 2) == (1, 2)) * 2


@construct()
def starred_unpack(x):
    first, *rest = [x, x * 2, x * 3]
    return first + sum(rest)


@construct()
def list_clear_copy(x):
    xs = [x, x + 1]
    ys = xs.copy()
    xs.clear()
    return ys, len(xs)


# -- strings and formatting -----------------------------------------------------------------------------------
@construct()
def str_methods(x, name="Layer_Norm"):
    s = name.lower().replace("_", "-")
    return x * len(s), s, s.split("-"), name.startswith("Layer"), s.upper().strip("N")


@construct()
def str_join(x):
    return x + 1, ",".join(str(i) for i in range(4)), "-".join(["a", "b"])


@construct()
def fstring_format_spec(x):
    return x + 1, f"{3.14159:.2f}|{42:5d}|{7:03}|{'ab':>4}|{255:x}|{0.5:%}"


@construct()
def fstring_shape(x):
    return x + 1, f"shape={tuple(x.shape)} n={x.numel()} dim={x.dim()}"


@construct()
def percent_format(x):
    return x + 1, "%s-%d-%.3f" % ("a", 3, 1.5), "%(k)s" % {"k": "v"}


@construct()
def str_format_method(x):
    return x + 1, "{}/{:>3}/{k}".format(1, "b", k=2.5), "{0}{0}".format("z")


@construct()
def str_partition_find(x):
    key = "encoder.layer.0"
    head, _, tail = key.partition(".")
    return x * (key.find("layer") + key.rfind(".")), head, tail, key.count(".")


@construct()
def str_checks(x):
    return x + "12".isdigit() + "ab".isalpha() * 2 + " ".isspace() * 4 + "Ab".istitle() * 8


@construct()
def str_in_and_compare(x, name="conv1"):
    return x * 2 if "conv" in name and name < "linear" else x


@construct()
def str_multiply_pad(x):
    return x + 1, "ab" * 3, "7".zfill(3), "x".center(5, "*"), "a,b,,c".split(",", 2)


@construct()
def str_encode_ord(x):
    return x + ord("a"), chr(98), "é".encode("utf-8"), "abc"[::-1]


@construct()
def str_of_numbers(x):
    return x * int("12") + float("1.5"), str(3), repr(2.5), int("ff", 16)


# -- iteration builtins -------------------------------------------------------------------------------------------
@construct(xy)
def zip_enumerate(x, y):
    return [a * i + b for i, (a, b) in enumerate(zip([x, y], [y, x]), start=1)]


@construct()
def map_lambda(x):
    return list(map(lambda k: x * k, [1, 2, 3]))


@construct(xy)
def map_two_iterables(x, y):
    return list(map(torch.add, [x, y], [y, x]))


@construct()
def filter_lambda(x):
    return sum(filter(lambda k: k % 2, range(7))) * x


@construct()
def filter_none(x):
    return x * len(list(filter(None, [0, 1, "", "a", None, 3])))


@construct()
def reversed_list(x):
    return [x * k for k in reversed([1, 2, 3])]


@construct()
def sorted_key_reverse(x):
    words = sorted(["bb", "a", "ccc"], key=len, reverse=True)
    return x * len(words[0]), words


@construct()
def min_max_key(x):
    d = {"a": 3, "b": 1, "c": 2}
    return x * d[min(d, key=d.get)] + d[max(d, key=lambda k: d[k])], max(3, 7, 5), min([4, 2], default=0)


@construct()
def sum_start(x):
    return sum([x, x * 2], x * 10), sum(range(5), 100)


@construct()
def any_all_generators(x):
    xs = [1, 2, 3]
    return x + any(v > 2 for v in xs) + all(v > 0 for v in xs) * 2 + any([]) * 4


@construct()
def iter_next_default(x):
    it = iter([1, 2])
    a, b, c = next(it), next(it), next(it, 10)
    return x * (a + b + c)


@construct()
def len_of_things(x):
    return x * (len("abc") + len(range(3)) + len({1: 2}) + len(x.shape) + len(x))


@construct()
def range_arith(x):
    r = range(2, 10, 3)
    return x * (r[1] + len(r) + (5 in r)), list(r[::-1])


@construct()
def divmod_pow_round(x):
    q, r = divmod(17, 5)
    return x * (q + r) + pow(2, 3) + round(2.567, 2) + abs(-3)


@construct()
def isinstance_builtins(x):
    return x + isinstance(3, int) + isinstance(True, int) * 2 + isinstance(x, torch.Tensor) * 4


@construct()
def id_and_is(x):
    a = [1]
    b = a
    return x + (id(a) == id(b)) + (a is b) * 2 + (id(a) == id([1])) * 4


@construct()
def hash_of_constants(x):
    return x + (hash(3) == 3) + (hash("ab") == hash("a" + "b")) * 2 + (hash((1, 2)) == hash((1, 2))) * 4


@construct()
def globals_read(x):
    return x * globals()["SCALE"] + SCALE


@construct()
def print_text(x):
    print("scaling by", SCALE, f"{1.5:.1f}")
    return x * SCALE


@construct()
def math_functions(x):
    return x * math.sqrt(16) + math.floor(2.7) + math.log(math.e) + math.pi * math.cos(0), math.isclose(1.0, 1.0)


@construct()
def math_on_sizes(x):
    return x.reshape(2, 2) * math.prod(x.shape) + math.ceil(x.numel() / 3)


@construct()
def copy_copy_list(x):
    xs = [x, [1, 2]]
    ys = copy.copy(xs)
    ys[1].append(3)
    return ys[0] * len(xs[1])


@construct()
def copy_deepcopy_dict(x):
    cfg = {"a": [1, 2], "b": {"c": 3}}
    new = copy.deepcopy(cfg)
    new["a"].append(9)
    return x * len(cfg["a"]) + new["b"]["c"], new


@construct()
def int_bool_conversions(x):
    return x * (int(True) + bool(3) + int(2.9) + int(-2.9)), float(7)


@construct(xn)
def int_argument_arith(x, n):
    return x * (n // 2) + n % 2 + n ** 2


@construct()
def chained_comparison(x, a=1, b=2):
    return x + 1 if 0 < a < b <= 2 else x


@construct()
def walrus_operator(x):
    if (n := x.shape[0]) > 2:
        return x * n
    return x


@construct()
def ternary_on_shape(x):
    return x.sum() if x.dim() == 1 else x.sum(0)


@construct(x23)
def tensor_shape_unpack(x):
    rows, cols = x.shape
    return x.reshape(cols, rows) * rows
