"""``collections.deque``, list/dict/OrderedDict methods, dict ``|``, sequence ``==`` and the ``copy`` module inside
captured code: differential against eager (results, mutated inputs, errors caught inside the function), then
graph counts; and the cases that must still break or run eagerly.
"""
from __future__ import annotations

import collections
import copy
import dataclasses

import pytest
import torch

import dynacap
from differential import CountingBackend, assert_fully_captured, assert_same, run_differential

BACKENDS = ["eager", "aot_eager"]


def _fresh(*build):
    """``fresh_inputs`` for run_differential: new objects per run (deques are shared by its copying)."""
    def inputs():
        torch.manual_seed(0)
        return tuple(b() for b in build), {}
    return inputs


# -- deque ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_deque_made_in_the_trace_keeps_cpythons_order_and_maxlen(backend):
    def fn(x):
        q = collections.deque([1, 2], maxlen=3)
        q.append(x)
        q.appendleft(x * 2)          # drops x from the right (maxlen)
        q.extendleft([5, 6])          # 6 ends up first; drops from the right
        q.rotate(-1)
        first = q.popleft()
        q.extend([x + 1])
        c = collections.deque([1, 5, 5, 2])
        c.remove(5)
        c.insert(1, 7)
        return first, list(q), len(q), q.maxlen, q[0], q[-1] * 3, 5 in c, c.count(5), c.index(2), list(c)

    assert_fully_captured(fn, torch.randn(3))
    run_differential(fn, torch.randn(3), backend=CountingBackend(backend))


def test_deque_escapes_as_one_real_deque():
    def fn(x):
        q = collections.deque(maxlen=2)
        q.append(x)
        q.append(x + 1)
        q.append(x + 2)
        return q, [q]

    counting = CountingBackend()
    out = dynacap.optimize(fn, backend=counting, fullgraph=True)(torch.ones(2))
    assert type(out[0]) is collections.deque and out[0].maxlen == 2 and out[1][0] is out[0]
    assert_same(list(fn(torch.ones(2))[0]), list(out[0]))
    assert counting.compiles == 1


def test_frame_deque_mutated_in_place():
    def fn(x, q):
        q.append(x)
        old = q.popleft()
        q.appendleft(old * 2)
        return len(q), q[1] + 1, x * 2

    counting = CountingBackend()
    compiled = dynacap.optimize(fn, backend=counting, fullgraph=True)
    for _ in range(2):
        q, expected_q = (collections.deque([1.0, 2.0], maxlen=4) for _ in range(2))
        expected = fn(torch.ones(2), expected_q)
        out = compiled(torch.ones(2), q)
        assert_same(expected, out)
        assert type(q) is collections.deque and q.maxlen == 4 and len(q) == len(expected_q) == 3
        assert q[0] == expected_q[0] and q[1] == expected_q[1]
        assert_same(expected_q[2], q[2])
    assert counting.compiles == 1


def test_deque_errors_are_caught_as_in_eager():
    def fn(x):
        q = collections.deque()
        try:
            q.pop()
        except IndexError as e:
            first = str(e)
        try:
            q[3]
        except IndexError as e:
            second = str(e)
        try:
            q.remove(7)
        except ValueError as e:
            third = str(e)
        return x + 1, first, second, third

    assert_fully_captured(fn, torch.randn(2))
    run_differential(fn, torch.randn(2))


def test_deque_live_across_a_graph_break_is_a_real_deque():
    def fn(x):
        q = collections.deque([x], maxlen=3)
        q.append(x * 2)
        print("between")
        q.append(x * 3)
        return list(q), q.maxlen

    run_differential(fn, torch.randn(2))


def test_deque_loop_sees_its_changes():
    def fn(x):
        q = collections.deque([1, 2, 3])
        out = []
        try:
            for v in q:
                out.append(v)
                if v == 2:
                    q.append(4)       # the next step raises: deque mutated during iteration
        except RuntimeError as e:
            out.append(str(e))
        r = collections.deque([1, 2])
        for v in r:
            r.reverse()               # neither moves CPython's iterator on: no error
            r[0] = 7
            out.append(v)
        return x + 1, out, list(r)

    assert_fully_captured(fn, torch.randn(2))
    run_differential(fn, torch.randn(2))


def test_deque_concatenation_still_breaks_with_eagers_result():
    def fn(x):
        q = collections.deque([x])
        r = q + collections.deque([x * 2])
        return type(r).__name__, len(r)

    with pytest.raises(dynacap.Unsupported):
        dynacap.optimize(fn, backend="eager", fullgraph=True)(torch.ones(2))
    run_differential(fn, torch.ones(2))


# -- list, dict, OrderedDict methods --------------------------------------------------------------------------


def test_list_remove_index_count_compare_by_identity_then_equality():
    def fn(x, xs):
        ys = [x, x, 2, 3.0, "a"]
        ys.remove(x)                  # the first x, the same object: no `==` asked
        zs = [2, 3.0, "a", 2]
        zs.remove(3)                  # 3 == 3.0
        try:
            zs.remove("zz")
        except ValueError as e:
            message = str(e)
        try:
            zs.index(9, 1)
        except ValueError as e:
            missing = str(e)
        xs.remove(1)
        return len(ys), ys.index(x), zs.count(2), zs.index("a", 1), message, missing, ys[0] * 2, zs

    run_differential(fn, torch.randn(2), [1, 1, 2])
    assert_fully_captured(fn, torch.randn(2), [1, 1, 2])


def test_list_remove_of_a_tensor_compared_by_value_breaks():
    def fn(x, y):
        ys = [x]
        ys.remove(y)                  # not the same tensor: `x == y`'s truth is known only at run time
        return len(ys)

    with pytest.raises(dynacap.Unsupported):
        dynacap.optimize(fn, backend="eager", fullgraph=True)(torch.ones(1), torch.ones(1))


def test_dict_popitem_and_ordered_dict_moves():
    def fn(x, od):
        d = {"a": x, "b": x * 2}
        k, v = d.popitem()
        try:
            {}.popitem()
        except KeyError as e:
            empty = str(e)
        od.move_to_end("p", last=False)
        first = od.popitem(last=False)
        made = collections.OrderedDict(a=1, b=2, c=3)
        made.move_to_end("a")
        last = made.popitem()
        return k, v + 1, empty, first, list(od), list(made), last, type(made).__name__

    od = collections.OrderedDict([("q", 1), ("p", 2), ("r", 3)])
    diff = run_differential(fn, torch.randn(2), od.copy(),
                            fresh_inputs=_fresh(lambda: torch.randn(2), lambda: collections.OrderedDict(od)))
    assert diff.compiles_first == 1
    mine = collections.OrderedDict(od)
    dynacap.optimize(fn, backend="eager", fullgraph=True)(torch.randn(2), mine)
    assert list(mine.items()) == [("q", 1), ("r", 3)]


def test_dict_union_operators():
    def fn(x, d):
        m = d | {"c": x}
        od = collections.OrderedDict(z=1) | {"a": 2}
        rd = {"k": 0} | collections.OrderedDict(j=1)   # OrderedDict.__ror__ answers first
        d |= [("e", 5)]
        return m["c"] * m["a"], list(m), type(od).__name__, type(rd).__name__, list(rd), sorted(d)

    run_differential(fn, torch.randn(2), {"a": 3, "b": 4})
    assert_fully_captured(fn, torch.randn(2), {"a": 3, "b": 4})


def test_tuple_equality_of_traced_values():
    def fn(x, y):
        def f(*args):
            return args

        t = (x, 1)
        return f(*t) == t, (x, 2) == (x, 3), [x] != [x, 1], (x,) == (x, 1), x + 1

    run_differential(fn, torch.randn(2), torch.randn(2))
    assert_fully_captured(fn, torch.randn(2), torch.randn(2))


# -- Counter, ChainMap ---------------------------------------------------------------------------------------


def test_counter_arithmetic_and_counts():
    def fn(x):
        c = collections.Counter(a=3, b=1)
        d = collections.Counter(["a", "c", "c"])
        c.subtract({"b": 2})
        parts = (c + d, c - d, c | d, c & d, +c, -c)
        return (x * c["a"] + c["zzz"], [sorted(p.items()) for p in parts], type(parts[0]).__name__, c.total(),
                sorted(d.elements()), d.most_common(1), c == collections.Counter(a=3, b=-1))

    assert_fully_captured(fn, torch.randn(2))
    run_differential(fn, torch.randn(2))


def test_chainmap_writes_go_to_the_first_map():
    def fn(x, base):
        child = collections.ChainMap(base).new_child({"b": 2})
        child["a"] = 10
        child["c"] = x
        return x * child["a"] + base["a"], child["b"], len(child.maps), "c" in base, child.maps[0]["c"] + 1

    run_differential(fn, torch.randn(2), {"a": 1})
    assert_fully_captured(fn, torch.randn(2), {"a": 1})


def test_chainmap_lookups_and_dict_of_it():
    def fn(x, defaults):
        m = collections.ChainMap({"lr": 5}, defaults)
        return x * m["lr"] + m["wd"], len(m), dict(m), list(m.keys()), list(m.items()), "wd" in m

    run_differential(fn, torch.randn(2), {"lr": 1, "wd": 2})
    assert_fully_captured(fn, torch.randn(2), {"lr": 1, "wd": 2})


# -- copy ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_deepcopy_keeps_sharing_and_copies_tensors(backend):
    def fn(x):
        inner = [1, 2]
        xs = {"a": inner, "b": inner, "t": (x, x * 2), "q": collections.OrderedDict(k=[3])}
        ys = copy.deepcopy(xs)
        ys["a"].append(9)
        return (ys["b"], inner, ys["a"] is ys["b"], ys["a"] is inner, ys["t"][0] + ys["t"][1],
                ys["t"][0] is x, type(ys["q"]).__name__, ys["q"]["k"] is xs["q"]["k"])

    assert_fully_captured(fn, torch.randn(3))
    run_differential(fn, torch.randn(3), backend=CountingBackend(backend))


def test_copy_copy_is_shallow():
    def fn(x, xs):
        ys = copy.copy(xs)
        ys[1].append(3)
        ys.append(x)
        d = copy.copy({"a": xs})
        return ys[0] * len(xs[1]), len(xs), d["a"] is xs, copy.copy((x, 1))[0] is x

    run_differential(fn, torch.randn(2), [torch.ones(2), [1, 2]])
    assert_fully_captured(fn, torch.randn(2), [torch.ones(2), [1, 2]])


def test_copies_of_deques_and_defaultdicts_keep_their_kind():
    def fn(x):
        q = collections.deque([x, [1]], maxlen=3)
        r = copy.copy(q)
        r.append(2)
        d = copy.copy(collections.defaultdict(list))
        d["a"].append(1)
        s = copy.deepcopy(q)
        return (len(q), list(r), r[1] is q[1], r.maxlen, dict(d), type(d).__name__, s[1] is q[1], s.maxlen,
                s[0] + 1, type(s).__name__)

    assert_fully_captured(fn, torch.randn(2))
    run_differential(fn, torch.randn(2))


def test_deepcopy_of_a_non_leaf_raises_as_in_eager():
    def fn(x):
        y = x * 2
        try:
            copy.deepcopy(y)
        except RuntimeError as e:
            return y + 1, str(e)[:40]
        return y, "copied"

    run_differential(fn, torch.randn(2, requires_grad=True))


def test_deepcopy_of_a_leaf_requiring_grad_gives_a_new_leaf():
    def fn(x):
        y = copy.deepcopy(x)
        return y, y is x, y.requires_grad, y.is_leaf

    run_differential(fn, torch.randn(2, requires_grad=True))


@dataclasses.dataclass
class _Point:
    x: torch.Tensor
    scale: float
    tags: list


class _Plain:
    def __init__(self, t):
        self.t = t
        self.tags = ["a"]


def test_dataclass_asdict_deep_copies_the_fields():
    def fn(x, p):
        d = dataclasses.asdict(p)
        d["tags"].append("new")
        return d["x"] * d["scale"] + x, d["tags"] is p.tags, p.tags, sorted(d)

    args = (torch.randn(2), _Point(torch.randn(2), 3.0, ["t"]))
    run_differential(fn, *args, fresh_inputs=_fresh(lambda: args[0], lambda: _Point(args[1].x, 3.0, ["t"])))
    assert_fully_captured(fn, *args)


def _copies_of_plain_objects(x, obj):
    q = copy.deepcopy(obj)
    q.tags.append("b")
    s = copy.copy(obj)
    return q.t * 2, obj.tags, q is obj, q.t is obj.t, s.tags is obj.tags, s.t is obj.t, x + 1


def test_copies_of_plain_objects_give_eagers_result():
    args = (torch.randn(2), _Plain(torch.randn(2)))
    run_differential(_copies_of_plain_objects, *args,
                     fresh_inputs=_fresh(lambda: args[0], lambda: _Plain(args[1].t)))


def test_copies_of_plain_objects_are_one_graph():
    assert_fully_captured(_copies_of_plain_objects, torch.randn(2), _Plain(torch.randn(2)))


def test_deepcopy_with_a_memo_of_the_caller_runs_eagerly():
    def fn(x):
        memo = {}
        y = copy.deepcopy([x], memo)
        return y[0] + 1, len(memo) > 0

    with pytest.raises(dynacap.Unsupported):
        dynacap.optimize(fn, backend="eager", fullgraph=True)(torch.ones(2))
    # Each call's id() values reach the resumed code as new constants: the cache is not hit.
    run_differential(fn, torch.ones(2), check_cache=False)


PairNT = collections.namedtuple("PairNT", ["a", "b"])


def test_namedtuple_make_from_an_iterable():
    def f(x):
        p = PairNT._make([x, x * 2])
        q = PairNT._make(t * 3 for t in (x, 1))
        return p.b - p.a, q, type(q).__name__

    assert_fully_captured(f, torch.randn(3))
    run_differential(f, torch.randn(3))


def test_namedtuple_make_of_the_wrong_length_raises_as_in_eager():
    def f(x):
        try:
            PairNT._make([x, x, x])
        except TypeError as e:
            return x + 1, str(e)
        return x, ""

    assert_fully_captured(f, torch.randn(3))
    run_differential(f, torch.randn(3))


def test_namedtuple_make_of_a_frame_generator_still_breaks():
    # A real generator passed in is never advanced at capture time.
    def f(x, items):
        return PairNT._make(items).a + x

    with pytest.raises(dynacap.Unsupported):
        dynacap.optimize(f, backend="eager", fullgraph=True)(torch.randn(2), iter([1, 2]))
    x = torch.randn(2)
    out = dynacap.optimize(f, backend="eager")(x, (i for i in (1, 2)))
    assert torch.equal(out, f(x, (i for i in (1, 2))))
