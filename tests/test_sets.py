"""Sets and frozensets inside captured code (issue 8 item 3, ``values/sets.py``).

Literals, comprehensions, ``set()``/``frozenset()``, methods and operators,
on constants (results, ``pop()`` and iteration order are CPython's) and on
tensors and functions (hashed by identity: membership and lengths are exact;
iterating such a set breaks, its order depends on ids at run time); sets
read from the frame are guarded by what the code reads of them.  Each program runs differentially (results, mutated inputs, globals,
printed text, exceptions) under ``eager`` and ``aot_eager``, then as one
graph with ``fullgraph=True`` where it is captured whole.
"""
import pytest
import torch

import dynacap
from differential import CountingBackend, assert_fully_captured, explain_captured, run_differential

BACKENDS = ["eager", "aot_eager"]


def one_graph(fn, *args, backend="eager"):
    """Differential under ``backend``, then one graph with no break, then ``fullgraph=True`` runs."""
    d = run_differential(fn, *args, backend=CountingBackend(backend))
    assert d.graph_count == 1, explain_captured(fn, *args)
    assert_fully_captured(fn, *args, min_ops=1)
    dynacap.reset()
    dynacap.optimize(fn, backend=backend, fullgraph=True)(*args)
    return d


# -- constant members: CPython's results and order ------------------------------------------------
def literals_and_methods(t):
    s = {3, 1, 2}
    s.add(4)
    s.discard(1)
    s.discard(99)
    s.remove(2)
    u = s.union([7, 8], (9,))
    i = s.intersection({3, 4, 5})
    d = u.difference({7})
    x = s.symmetric_difference({4, 10})
    return t * len(u), u, i, d, x, s.issubset(u), u.issuperset(s), s.isdisjoint({0}), s.copy()


def operators_on_sets(t):
    a = {"a", "b", "c"}
    b = {"b", "d"}
    return (t + 1, a | b, a & b, a - b, a ^ b, a <= b, a < a | b, a >= {"a"}, a > b, a == {"c", "b", "a"},
            a != b, "a" in a, "z" not in a, a == 3, frozenset(a) == a)


def in_place_operators(t):
    s = {1, 2, 3}
    alias = s
    s |= {4}
    s &= {2, 3, 4, 5}
    s -= {3}
    s ^= {9, 2}
    return t * len(alias), alias, s is alias


def comprehension_and_unpacking(t, xs):
    squares = {x * x for x in range(-3, 4)}
    merged = {*xs, *squares, 100}
    return t + len(merged), merged, sorted(squares)


def iteration_order(t):
    # 9, 17 and 25 collide with 1 in an 8-slot table: the order depends on insertion history.
    s = {9, 1, 17, 25}
    s.discard(1)
    s.add(33)
    s.add(1)
    return [t * v for v in s], str(s), list({"x", "y", "zz"}), s.pop(), s


def frozensets(t):
    fs = frozenset({1, 2})
    both = fs | {3}
    other = {3} | fs
    return t + len(both), both, other, fs & {2}, 2 in fs, fs == frozenset({2, 1})


def nested_in_containers(t, out):
    s = {1, 2}
    out.append(s)
    s.add(3)
    d = {"s": s}
    return t * 2, d, s, s


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [literals_and_methods, operators_on_sets, in_place_operators, iteration_order,
                                frozensets])
def test_constant_sets_in_one_graph(fn, backend):
    one_graph(fn, torch.randn(3), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_set_comprehension_and_unpacking(backend):
    one_graph(comprehension_and_unpacking, torch.randn(3), [5, 1, 5], backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_set_stored_in_an_input_list_is_one_object(backend):
    def check(result, out):
        _, d, s, s2 = result
        assert s is s2 and d["s"] is s and out[0] is s

    d = one_graph(nested_in_containers, torch.randn(3), [], backend=backend)
    for outcome in d.captured:
        check(outcome.result, outcome.inputs[0][1])


GLOBAL_SET = None


def store_global_set(t):
    global GLOBAL_SET
    GLOBAL_SET = {t.shape[0], 7}
    GLOBAL_SET.add(8)
    return t + 1


def test_a_set_stored_in_a_global():
    global GLOBAL_SET
    try:
        one_graph(store_global_set, torch.randn(3))
        assert GLOBAL_SET == {3, 7, 8}
    finally:
        GLOBAL_SET = None


# -- members hashed by identity: tensors, modules, functions ---------------------------------------
def tensor_members(x, y):
    s = {x, y, x}
    s.add(x)
    t = {x}
    t.update([y, x])
    u = s - {y}
    both = s & t
    return (x * len(s) + len(t), x in s, (x + 1) in s, y in u, x in both, s == t, u <= s, len(s ^ {x}),
            (x, 1) in {(x, 1), (y, 2)}, x in {1, 2})


def module_level_helper(v):
    return v - 1


def function_members(x):
    def helper(v):
        return v + 1

    s = {module_level_helper, helper, module_level_helper}
    return helper(x) * len(s), module_level_helper in s, helper in s


def module_members(x, layer):
    s = {layer, layer}
    return layer(x) * len(s), layer in s


def single_tensor_member(x):
    s = {x}
    (only,) = s
    return [v * 2 for v in s], only + 1, s.pop() - 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_sets_of_tensors_in_one_graph(backend):
    one_graph(tensor_members, torch.randn(3), torch.randn(3), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_sets_of_functions_in_one_graph(backend):
    one_graph(function_members, torch.randn(3), backend=backend)


def test_a_set_of_modules_from_the_frame_breaks_with_eager_result():
    """Modules from the frame are guarded by class and structure, not identity: their hash is unknown."""
    layer = torch.nn.Linear(3, 3)
    run_differential(module_members, torch.randn(2, 3), layer)
    out = explain_captured(module_members, torch.randn(2, 3), layer)
    assert any("as a set member" in r.reason for r in out.break_reasons), out


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_set_of_one_tensor_iterates(backend):
    one_graph(single_tensor_member, torch.randn(3), backend=backend)


# -- what breaks, and why --------------------------------------------------------------------------------
def iterate_tensor_set(x, y):
    total = 0
    for v in {x, y}:  # two terms: the sum does not depend on the order
        total = total + v
    return total


def pop_tensor_set(x, y):
    return {x, y}.pop() * 0 + 1


def unhashable_member(x):
    return {x + 1, [1]}


def remove_missing(x):
    s = {1}
    s.remove(2)
    return x


def nan_member(x):
    nan = float("nan")
    return len({nan, nan}) + x


@pytest.mark.parametrize("fn,reason", [
    (iterate_tensor_set, "its order depends on their ids at run time"),
    (pop_tensor_set, "depends on their ids at run time"),
    (unhashable_member, "unhashable type: 'list' (TypeError at run time)"),
    (remove_missing, "KeyError at run time"),
    (nan_member, "a NaN as a set member"),
])
def test_breaks_keep_eager_behaviour(fn, reason):
    args = (torch.randn(3), torch.randn(3))[: fn.__code__.co_argcount]
    d = run_differential(fn, *args, check_cache=False)
    out = explain_captured(fn, *args) if d.eager.exception is None else None
    if out is not None:
        assert any(reason in r.reason for r in out.break_reasons), out
        assert all("___" not in r.reason for r in out.break_reasons)


def test_iterating_a_tensor_set_is_not_a_fixed_order():
    """Guarding against a baked order: iterating a two-tensor set must not be captured."""
    out = explain_captured(iterate_tensor_set, torch.randn(3), torch.randn(3))
    assert out.graph_break_count >= 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_set_and_frozenset_constructors(backend):
    def f(t, xs):
        a = set(xs)
        b = frozenset(xs)
        c = set()
        c.update(a, b)
        return t + len(c), a, b, set("abca"), frozenset(), set({"k": 1, "j": 2})

    one_graph(f, torch.randn(3), [3, 1, 3], backend=backend)


def test_set_of_tensors_from_a_list():
    def f(x, y):
        s = set([x, y, x])
        return x * len(s), y in s

    one_graph(f, torch.randn(3), torch.randn(3))


def set_across_a_break(t):
    s = {1, 2}
    s.add(3)
    print("break", sorted(s))
    s.add(4)
    return t + len(s), s, s


def tensor_set_across_a_break(x, y):
    s = {x, y}
    s.discard(y)
    print("break")
    return x * len(s), y in s, x in s


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn,args", [(set_across_a_break, 1), (tensor_set_across_a_break, 2)])
def test_a_set_live_across_a_graph_break(fn, args, backend):
    inputs = (torch.randn(3), torch.randn(3))[:args]
    d = run_differential(fn, *inputs, backend=CountingBackend(backend))
    assert d.graph_count >= 1
    if fn is set_across_a_break:
        for outcome in d.captured:
            assert outcome.result[1] is outcome.result[2]


# -- sets and frozensets read from the frame -------------------------------------------------------------

def iterate_frozenset(x, fs):
    return [x * v for v in fs]


def test_equal_frozensets_in_another_order_are_not_one_capture():
    """``frozenset([9, 1])`` and ``frozenset([1, 9])`` are equal but iterate differently."""
    compiled = dynacap.optimize(iterate_frozenset, backend="eager")
    x = torch.ones(1)
    for fs in (frozenset([9, 1]), frozenset([1, 9]), frozenset([9, 1])):
        assert [float(v) for v in compiled(x, fs)] == [float(v) for v in iterate_frozenset(x, fs)] == list(fs)


def use_frame_sets(x, s, names):
    s.add(5)
    s.discard(9)
    n = len(s) + ("a" in names) + len(names | {"z"})
    return x * n, sorted(names), names


def mutate_then_break(x, s):
    alias = s
    alias.add(3)
    print("break")
    s.add(4)
    return x + len(s), s


@pytest.mark.parametrize("backend", BACKENDS)
def test_frame_sets_are_read_and_written_back_in_place(backend):
    x = torch.randn(3)
    d = run_differential(use_frame_sets, x, {9, 1}, {"a", "b"}, backend=CountingBackend(backend),
                         fresh_inputs=lambda: ((x.clone(), {9, 1}, {"a", "b"}), {}))
    assert d.graph_count == 1
    for outcome in d.captured:
        assert outcome.inputs[0][1] == {1, 5}
        assert outcome.result[2] is outcome.inputs[0][2]
    out = dynacap.explain(use_frame_sets)(x, {9, 1}, {"a", "b"})
    assert out.graph_break_count == 0 and out.graph_count == 1, out
    d = run_differential(mutate_then_break, x, {1}, fresh_inputs=lambda: ((x.clone(), {1}), {}))
    for outcome in d.captured:
        assert outcome.result[1] is outcome.inputs[0][1] and outcome.result[1] == {1, 3, 4}


def bound_method_across_a_break(x):
    s = {1}
    add = s.add
    print("break")
    add(2)
    return x + 1, s


def test_a_set_method_live_across_a_graph_break():
    d = run_differential(bound_method_across_a_break, torch.randn(3))
    assert d.graph_count >= 1


def test_sets_of_tensors_under_inductor():
    one_graph(tensor_members, torch.randn(3), torch.randn(3), backend="inductor")


def set_as_a_dict_key(x):
    s = {1}
    try:
        d = {s: 1}
    except TypeError as e:
        return x + 1, str(e)
    return x, d


def list_as_a_comprehension_key(x):
    return x, {k: 1 for k in [[1]]}


@pytest.mark.parametrize("fn", [set_as_a_dict_key, list_as_a_comprehension_key])
def test_an_unhashable_dict_key_is_a_type_error_as_eager(fn):
    """Not an internal error: BUILD_MAP/MAP_ADD break where CPython raises TypeError."""
    run_differential(fn, torch.randn(3))


def lazy_isdisjoint(x, log):
    def gen():
        for i in range(5):
            log.append(i)
            yield i

    s = {2, 7}
    return x + 1, s.isdisjoint(gen()), s.issuperset(v * 7 for v in range(3) if not log.append(v)), list(log)


@pytest.mark.parametrize("backend", BACKENDS)
def test_isdisjoint_and_issuperset_stop_a_generator_where_eager_stops(backend):
    one_graph(lazy_isdisjoint, torch.randn(3), [], backend=backend)


def membership_and_length(x, names):
    return x * (("a" in names) + 10 * len(names))


def test_a_frame_set_read_by_in_and_len_is_guarded_by_the_answers_only():
    counting = CountingBackend()
    compiled = dynacap.optimize(membership_and_length, backend=counting)
    x = torch.ones(1)
    for names in ({"a", "b"}, {"a", "z"}, {"c", "a"}, {"b", "c"}, {"a", "b", "c"}):
        assert torch.equal(compiled(x, names), membership_and_length(x, names))
    # One capture for the three sets where "a" is in and the length is 2, one each for the other two.
    assert counting.compiles == 3


# -- property: random sequences of set operations on constants give CPython's order ----------------------
_MEMBERS = ["0", "1", "8", "9", "16", "17", "25", "-1", "True", "0.0", "-0.0", "1.0", "'a'", "'ab'", "(1, 2)", "None"]


def _random_set_program(rng) -> str:
    """``f(x)``: sets built, changed (growth and removals included), returned as lists and strings."""
    pick = lambda: rng.choice(_MEMBERS)  # noqa: E731
    items = [pick() for _ in range(rng.randint(0, 5))]
    lines = ["def f(x):", f"    s0 = {{{', '.join(items)}}}" if items else "    s0 = set()"]
    names = ["s0"]
    for _ in range(rng.randint(1, 8)):
        s, fresh = rng.choice(names), f"s{len(names)}"
        other = rng.choice(names)
        line = rng.choice([
            f"{s}.add({pick()})", f"{s}.discard({pick()})", f"{s} |= {{{pick()}, {pick()}}}", f"{s} -= {{{pick()}}}",
            f"{s} ^= {{{pick()}}}", f"{s}.update([{pick()}, {pick()}])", f"if {s}: {s}.pop()",
            f"{s}.update(range({rng.randint(0, 40)}))",
            f"for i in range({rng.randint(0, 5)}, 40, {rng.randint(2, 5)}): {s}.discard(i)",
            f"{fresh} = {s} | {{{pick()}}}", f"{fresh} = {s} & {other}", f"{fresh} = {{v for v in {s} if v != {pick()}}}",
            f"{fresh} = set(list({s}) + [{pick()}])",
        ])
        if line.startswith(fresh):
            names.append(fresh)
        lines.append("    " + line)
    lines.append(f"    return x + 1, {', '.join(f'list({n}), str({n})' for n in names)}")
    return "\n".join(lines)


@pytest.mark.parametrize("seed", range(40))
def test_random_set_programs_keep_cpythons_order(seed):
    import random

    namespace = {}
    exec(compile(_random_set_program(random.Random(seed)), f"<set program {seed}>", "exec"), namespace)
    d = run_differential(namespace["f"], torch.randn(2))
    assert d.graph_count == 1
    assert_fully_captured(namespace["f"], torch.randn(2))


# -- a set leaving the graph has eager's hash table (``values/set_tables.py``) -------------------------------
def _probe(s):
    """What later code can see of a set's table: its order after more insertions, then the order pop() takes.
    It empties ``s``: probe each set once."""
    from dynacap.values.set_tables import signature

    before = (list(s), signature(s))
    for extra in (17, 33, 9, 25, 41):
        s.add(extra)
    return before, list(s), [s.pop() for _ in range(len(s))]


def _random_program_returning_sets(rng, break_at) -> str:
    lines = _random_set_program(rng).splitlines()[:-1]
    names = sorted({word for line in lines for word in line.replace("=", " ").split() if word.startswith("s")
                    and word[1:].isdigit()})
    if break_at is not None:
        lines.insert(min(break_at, len(lines) - 1) + 1, "    n = int(x.sum().item() > 100)")
    lines.append(f"    return x + 1, [{', '.join(names)}]")
    return "\n".join(lines)


@pytest.mark.parametrize("seed", range(60))
def test_sets_leaving_the_graph_have_eagers_hash_table(seed):
    """Returned, or live across a break: the runtime sets iterate, grow and pop() as eager's do."""
    import random

    rng = random.Random(1000 + seed)
    source = _random_program_returning_sets(rng, rng.choice([None, rng.randint(1, 8)]))
    namespace = {}
    exec(compile(source, f"<set program {seed}>", "exec"), namespace)
    f = namespace["f"]
    x = torch.randn(2)
    eager = f(x)
    captured = dynacap.optimize(f, backend="eager")(x)
    assert [_probe(s) for s in captured[1]] == [_probe(s) for s in eager[1]], source


def popped_after_a_break(x, k):
    s = {k, -1} & {0, 1, 2, 3, 0.5}
    s.add(round((x + 2).amax().item(), 2))  # a break: `s` is a frame set from here on
    s ^= {1.5, 2}
    return s.pop(), s


def test_a_frame_set_changed_after_a_break_is_written_back_by_replaying_its_changes():
    """Fuzz seed 60004742: written back as a new set of its members, `s` popped another member than eager's."""
    x = torch.tensor([0.8490, -1.4713], dtype=torch.float64)
    d = run_differential(popped_after_a_break, x, 3)
    expected = _probe(d.eager.result[1])
    for outcome in d.captured:
        assert outcome.result[0] == d.eager.result[0] and _probe(outcome.result[1]) == expected


def pop_of_an_input(x, s):
    return x + s.pop(), s


def test_pop_of_a_frame_set_whose_copy_has_another_table_breaks():
    """``{1, 2, 3}`` after ``pop()`` and ``add(1)`` iterates as a new one but pops from where its last pop ended."""
    def make():
        s = {1, 2, 3}
        s.pop()
        s.add(1)
        return s

    x = torch.zeros(1)
    eager = pop_of_an_input(x, make())
    explained = dynacap.explain(pop_of_an_input)(x, make())
    assert any("hash table" in r.reason for r in explained.break_reasons)
    dynacap.reset()
    captured = dynacap.optimize(pop_of_an_input, backend="eager")(x, make())
    assert torch.equal(captured[0], eager[0]) and _probe(captured[1]) == _probe(eager[1])
    # A set with no such history is popped in the graph.
    dynacap.reset()
    counting = CountingBackend()
    eager_set, captured_set = {1, 2, 3}, {1, 2, 3}
    assert torch.equal(dynacap.optimize(pop_of_an_input, backend=counting)(x, captured_set)[0],
                       pop_of_an_input(x, eager_set)[0])
    assert counting.compiles == 1 and _probe(captured_set) == _probe(eager_set)


def discarded_then_grown(x, s):
    s.discard(1)
    s.add(9)  # reuses the dummy slot 1 left in eager's table
    n = int(x.sum().item() > 100)
    return x + n, s


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_changed_frame_set_keeps_eagers_table_across_a_break(backend):
    compiled = dynacap.optimize(discarded_then_grown, backend=backend)
    for _ in range(2):
        eager_set, captured_set = {1, 2, 3}, {1, 2, 3}
        discarded_then_grown(torch.zeros(1), eager_set)
        compiled(torch.zeros(1), captured_set)
        assert _probe(captured_set) == _probe(eager_set)


def rebuilt_after_removals(x):
    s = {3, 1, 2, 40, 19}
    s.discard(1)
    s.remove(2)
    u = {"a", "b", "c"} | {"b", "d"}  # a table presized by the merge: bigger than its members need
    return x + 1, s, u


def test_sets_made_in_the_graph_are_rebuilt_with_their_dummies_and_size():
    d = one_graph(rebuilt_after_removals, torch.randn(2))
    expected = [_probe(s) for s in d.eager.result[1:]]
    for outcome in d.captured:
        assert [_probe(s) for s in outcome.result[1:]] == expected


def add_of_an_item(x, s):
    s.add(round(x.amax().item(), 2))  # the break: `s.add` is on the stack at the resume
    s.add(7)
    return x + len(s), sorted(s)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_set_method_on_the_stack_at_a_resume_is_the_sets_method(backend):
    d = run_differential(add_of_an_item, torch.tensor([0.5, 0.25]), {1, 2}, backend=CountingBackend(backend))
    reasons = [r.reason for r in explain_captured(add_of_an_item, torch.tensor([0.5, 0.25]), {1, 2}).break_reasons]
    assert len(reasons) == 1 and ".item()" in reasons[0], reasons
    assert d.graph_count == 2
