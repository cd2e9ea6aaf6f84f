"""State: objects, lists and dicts passed in and changed, global writes, aliasing, order of side effects."""
import collections
import dataclasses

import torch

from . import construct

LOG = []
REGISTRY = {}
STEP = 0
HISTORY = collections.OrderedDict()


class Meter:
    def __init__(self):
        self.total = torch.zeros(4)
        self.count = 0

    def update(self, t):
        self.total = self.total + t
        self.count += 1
        return self


class Cache:
    def __init__(self):
        self.store = {}

    def get(self, key, make):
        if key not in self.store:
            self.store[key] = make()
        return self.store[key]


@dataclasses.dataclass(eq=False)  # compared by its fields, not a generated __eq__ over tensors
class State:
    x: torch.Tensor
    steps: int = 0
    seen: list = dataclasses.field(default_factory=list)


def with_meter():
    return (torch.randn(4), Meter())


def with_list():
    return (torch.randn(4), [torch.ones(4), 2])


def with_dict():
    return (torch.randn(4), {"w": torch.ones(4), "n": 1})


def with_state():
    return (State(torch.randn(4)),)


def with_cache():
    return (torch.randn(4), Cache())


@construct(with_meter)
def input_object_method_mutates(x, m):
    m.update(x).update(x * 2)
    return m.total / m.count


@construct(with_meter)
def input_object_attr_added(x, m):
    m.last = x.sum()
    return x + m.last


@construct(with_meter)
def input_object_attr_deleted(x, m):
    m.tmp = 1
    del m.tmp
    return x * m.count


@construct(with_state)
def input_dataclass_mutated(s):
    s.steps += 1
    s.seen.append(s.steps)
    s.x = s.x * 2
    return s.x.sum()


@construct(with_cache)
def input_cache_fills(x, c):
    a = c.get("a", lambda: x * 2)
    b = c.get("a", lambda: x * 100)
    return a + b, sorted(c.store)


@construct(with_list)
def input_list_of_tensor_mutated(x, xs):
    xs[0] = xs[0] + x
    xs.append(xs[1] * 3)
    return xs[0].sum()


@construct(with_list)
def input_list_inplace_tensor(x, xs):
    xs[0].add_(x)
    return xs[0] * xs[1]


@construct(with_dict)
def input_dict_updated(x, d):
    d["w"] = d["w"] * x
    d["n"] += 1
    d.setdefault("extra", [x.sum()])
    return d["w"].sum()


@construct(with_dict)
def input_dict_popped_and_returned(x, d):
    w = d.pop("w")
    return d, w + x


@construct()
def global_list_append(x):
    LOG.append("called")
    LOG.append(len(LOG))
    return x * len(LOG)


@construct()
def global_dict_register(x):
    REGISTRY["x"] = x.shape[0]
    REGISTRY.setdefault("calls", 0)
    REGISTRY["calls"] += 1
    return x * REGISTRY["calls"]


@construct()
def global_int_increment(x):
    global STEP
    STEP += 1
    return x * STEP


@construct()
def global_ordereddict_write(x):
    HISTORY["last"] = 1
    HISTORY.move_to_end("last", last=False)
    return x + len(HISTORY)


@construct()
def global_rebinding_read_after(x):
    global STEP
    before = STEP
    STEP = before + 10
    return x * (STEP - before)


@construct()
def alias_list_two_names(x):
    a = [x]
    b = a
    b.append(x * 2)
    return len(a), a[1] - x


@construct()
def alias_returned_twice(x):
    y = x * 2
    return y, y, [y]


@construct()
def alias_input_returned(x):
    return x, x.view(2, 2), [x]


@construct()
def alias_nested_containers(x):
    inner = [x]
    outer = {"a": inner, "b": inner}
    outer["a"].append(x + 1)
    return outer["b"], len(inner)


@construct()
def alias_object_shared(x):
    m = Meter()
    pair = (m, m)
    pair[0].update(x)
    return pair[1].count, pair[1].total


@construct()
def inplace_on_input(x):
    x.mul_(2)
    return x + 1


@construct()
def inplace_through_view(x):
    v = x.view(2, 2)
    v[0].zero_()
    return x.sum()


@construct()
def inplace_index_assign(x):
    y = x.clone()
    y[1:3] = 7.0
    y[y > 5] = 0.0
    return y


@construct()
def side_effect_order_in_calls(x):
    log = []

    def a():
        log.append("a")
        return 1

    def b():
        log.append("b")
        return 2

    return x * (a() + b() * a()), log


@construct()
def side_effect_order_args_eval(x):
    log = []

    def note(v):
        log.append(v)
        return v

    d = {note("k1"): note(1), note("k2"): note(2)}
    return x * d["k2"], log


@construct()
def closure_cell_shared(x):
    counter = [0]

    def inc():
        counter[0] += 1
        return counter[0]

    inc()
    inc()
    return x * counter[0], counter


@construct()
def nonlocal_rebound_in_loop(x):
    total = x

    def add(v):
        nonlocal total
        total = total + v

    for i in range(3):
        add(i)
    return total


@construct()
def object_identity_kept(x):
    m = Meter()
    objs = [m, m]
    return objs[0] is objs[1], m.update(x) is m, x + 1


@construct()
def returned_object_mutated_after(x):
    m = Meter()
    m.update(x)
    out = [m]
    m.count = 100
    return out


@construct()
def list_mutation_while_iterating_copy(x):
    xs = [1, 2, 3]
    for v in list(xs):
        if v % 2:
            xs.remove(v)
    return x * sum(xs), xs


@construct()
def dict_order_after_delete_insert(x):
    d = {"a": 1, "b": 2, "c": 3}
    del d["a"]
    d["a"] = 4
    return list(d), x * d["a"]


@construct()
def set_of_ints_order(x):
    s = {30, 1, 17, 4}
    s.add(2)
    return list(s), x * len(s)


@construct()
def set_of_strings_iteration(x):
    names = {"weight", "bias", "scale"}
    return sorted(names), [n for n in names], x + len(names)


@construct()
def default_mutable_argument(x, acc=[]):  # noqa: B006 (the construct: a default shared between calls)
    acc = list(acc)
    acc.append(1)
    return x * len(acc)


@construct()
def kwargs_dict_mutated(x):
    def f(**kw):
        kw["z"] = 3
        return kw

    opts = {"a": 1}
    out = f(**opts)
    return x * len(out), opts, out


@construct()
def star_args_tuple_identity(x):
    def f(*args):
        return args

    t = (x, 1)
    return f(*t) == t, x + 1


@construct()
def tensor_attribute_set(x):
    y = x * 2
    y.tag = "scaled"
    return y, y.tag


@construct()
def requires_grad_state(x):
    y = x.detach().requires_grad_(True)
    z = (y * 2).sum()
    return z, y.requires_grad, z.requires_grad


@construct()
def no_grad_state_restored(x):
    with torch.no_grad():
        a = x * 2
    b = x * 3
    return a, b, torch.is_grad_enabled()


@construct()
def grad_mode_query_in_branch(x):
    return x * 2 if torch.is_grad_enabled() else x
