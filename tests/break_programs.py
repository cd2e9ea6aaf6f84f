"""Programs with graph breaks, shared by the break tests and the Dynamo oracle table.

Each entry of ``PROGRAMS`` is ``(name, fn, make_inputs)``; ``make_inputs()``
returns fresh ``(args, kwargs)``.  Programs print to ``sys.stdout`` (the
differential runner captures it) and never depend on randomness.
"""
from __future__ import annotations

import json
import logging
import zlib

import torch
import torch.nn as nn

LOG = logging.getLogger("dynacap.tests.user")
SCALE = 3


def t(*shape, grad=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).requires_grad_(grad)


def print_mid(x):
    y = x.sin()
    print("p")
    return y.cos()


def tensor_if(x):
    if x.sum() > 0:
        return x * 2
    else:
        return x - 1


def item_in_python(x):
    y = x * 2
    s = y.sum().item()
    return y + s


def tolist_break(x):
    y = x.relu()
    values = y.tolist()
    return y * len(values), values


def numpy_break(x):
    y = x + 1
    arr = y.numpy()
    return y * 2, arr.shape


def unknown_c_function(x):
    y = x.cos()
    k = zlib.crc32(b"dynacap") % 7
    return y * k


def for_range_print(x):
    for i in range(3):
        x = x + i
        print("iter", i)
    return x


def for_list_print(x, weights):
    for w in weights:
        x = x * w
        print("w", w)
    return x


def while_print(x):
    i = 0
    while i < 3:
        x = x.sin()
        print("step", i)
        i += 1
    return x


def no_grad_break(x):
    y = x * 2
    with torch.no_grad():
        z = y + 1
        print("inside", torch.is_grad_enabled())
        z = z * 3
    return z, y, torch.is_grad_enabled()


def enable_grad_break(x):
    with torch.enable_grad():
        y = x * 2
        print("inside", torch.is_grad_enabled())
        y = y + 1
    return y


def try_except_before(x):
    y = x + 1
    try:
        print("in try")
        y = y / 0 if False else y * 2
    except ZeroDivisionError:
        y = y - 1
    return y


def try_raise_after_break(x):
    y = x + 1
    try:
        print("about to fail")
        json.loads("{")
    except ValueError as e:
        print("caught", type(e).__name__)
        y = y * 3
    finally:
        print("finally")
    return y


def middle_of_expression(a, b, c):
    return a + loud(b) * c


def loud(v):
    print("loud")
    return v.exp()


def many_locals(x):
    a = x + 1
    b = x * 2
    c = x - 3
    dead = x * 100
    d = a * b
    print("mid")
    return c + d


class PrintingModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 4)
        self.fc2 = nn.Linear(4, 2)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        print("hidden norm computed")
        return self.fc2(h)


_MODULE = PrintingModule().eval()


def module_break(x):
    return _MODULE(x)


def several_breaks(x):
    a = x.sin()
    print("one")
    b = a.cos()
    print("two")
    c = b.tanh()
    print("three")
    return a + b + c


def eager_part_raises(x):
    y = x.sin()
    json.loads("not json")
    return y


def h_prints(x):
    x = x + 1
    print("h")
    return x * 2


def g_calls_h(x):
    return h_prints(x.sin()) + 1


def f_calls_g(x):
    return g_calls_h(x * 3) - 1


def depth1(x):
    return h_prints(x * 3) - 1


def depth3(x):
    return f_calls_g(x.cos()) * 2


def global_write_then_break(x):
    global SCALE
    SCALE = 4
    y = x * SCALE
    print("scaled")
    return y + SCALE


def list_on_stack(x):
    return [x.sin(), loud(x), x.cos()]


def dict_across_break(x):
    d = {"a": x + 1}
    print("dict")
    d["b"] = d["a"] * 2
    return d


def kwargs_print(x):
    y = x * 2
    print("a", "b", sep="-", end="!\n")
    return y


def logging_mid(x):
    y = x.exp()
    LOG.info("value computed")
    return y.log()


def nonzero_break(x):
    idx = (x > 0).nonzero()
    return idx.shape[0] + x.sum(), idx


def tensor_and_flag(x, flag):
    if x.max() > 0.5 and flag:
        return x * 10
    return x


def bool_any(x):
    if bool((x > 1).any()):
        return x - 1
    return x + 1


class HelperMethod(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def helper(self, x):
        print("helper")
        return x * 2

    def forward(self, x):
        return self.helper(self.lin(x)).relu()


_HELPER = HelperMethod().eval()


def method_break(x):
    return _HELPER(x)


def return_in_with_after_break(x):
    with torch.no_grad():
        y = x * 2
        print("no grad")
        return y + 1


def assert_on_tensor(x):
    y = x.abs()
    assert (y >= 0).all()
    return y * 2


def inplace_across_break(x):
    x.add_(1)
    print("mutated once")
    x.mul_(2)
    return x.sum()


class Loud(nn.Module):
    def forward(self, x):
        print("loud layer")
        return x * 2


_SEQ = nn.Sequential(nn.Linear(4, 4), Loud(), nn.ReLU()).eval()


def sequential_with_break(x):
    return _SEQ(x) + 1


def unknown_call_with_kwargs(x):
    y = x.sigmoid()
    text = json.dumps({"b": 1, "a": 2}, sort_keys=True)
    return y * len(text)


def int_of_tensor(x):
    n = int(x.abs().sum()) + 1
    return x * n


def make_closure_program():
    offset = torch.tensor(0.5)

    def closure_break(x):
        y = x + offset
        print("closure")
        return y * offset

    return closure_break


closure_break = make_closure_program()


def format_tensor(x):
    y = x.tanh()
    label = f"{y.sum():.2f}"
    return y, len(label)


PROGRAMS = [
    ("print_mid", print_mid, lambda: ((t(4),), {})),
    ("tensor_if_pos", tensor_if, lambda: ((t(4).abs(),), {})),
    ("tensor_if_neg", tensor_if, lambda: ((-t(4).abs(),), {})),
    ("item", item_in_python, lambda: ((t(4),), {})),
    ("tolist", tolist_break, lambda: ((t(4),), {})),
    ("numpy", numpy_break, lambda: ((t(4),), {})),
    ("unknown_c_function", unknown_c_function, lambda: ((t(4),), {})),
    ("for_range_print", for_range_print, lambda: ((t(4),), {})),
    ("for_list_print", for_list_print, lambda: ((t(4), [1.0, 2.0, 0.5]), {})),
    ("while_print", while_print, lambda: ((t(4),), {})),
    ("no_grad_break", no_grad_break, lambda: ((t(4, grad=True),), {})),
    ("enable_grad_break", enable_grad_break, lambda: ((t(4, grad=True),), {})),
    ("try_except_before", try_except_before, lambda: ((t(4),), {})),
    ("try_raise_after_break", try_raise_after_break, lambda: ((t(4),), {})),
    ("middle_of_expression", middle_of_expression, lambda: ((t(4), t(4, seed=1), t(4, seed=2)), {})),
    ("many_locals", many_locals, lambda: ((t(4),), {})),
    ("module_break", module_break, lambda: ((t(2, 4),), {})),
    ("several_breaks", several_breaks, lambda: ((t(4),), {})),
    ("eager_part_raises", eager_part_raises, lambda: ((t(4),), {})),
    ("nested_depth1", depth1, lambda: ((t(4),), {})),
    ("nested_depth2", f_calls_g, lambda: ((t(4),), {})),
    ("nested_depth3", depth3, lambda: ((t(4),), {})),
    ("global_write_then_break", global_write_then_break, lambda: ((t(4),), {})),
    ("list_on_stack", list_on_stack, lambda: ((t(4),), {})),
    ("dict_across_break", dict_across_break, lambda: ((t(4),), {})),
    ("kwargs_print", kwargs_print, lambda: ((t(4),), {})),
    ("logging_mid", logging_mid, lambda: ((t(4).abs() + 0.1,), {})),
    ("nonzero", nonzero_break, lambda: ((t(6),), {})),
    ("tensor_and_flag", tensor_and_flag, lambda: ((t(4).abs() + 1, True), {})),
    ("bool_any", bool_any, lambda: ((t(4) * 3,), {})),
    ("method_break", method_break, lambda: ((t(2, 3),), {})),
    ("return_in_with", return_in_with_after_break, lambda: ((t(4, grad=True),), {})),
    ("assert_on_tensor", assert_on_tensor, lambda: ((t(4),), {})),
    ("inplace_across_break", inplace_across_break, lambda: ((t(4),), {})),
    ("sequential_with_break", sequential_with_break, lambda: ((t(2, 4),), {})),
    ("unknown_call_with_kwargs", unknown_call_with_kwargs, lambda: ((t(4),), {})),
    ("int_of_tensor", int_of_tensor, lambda: ((t(4),), {})),
    ("closure_break", closure_break, lambda: ((t(4),), {})),
    ("format_tensor", format_tensor, lambda: ((t(4),), {})),
]
