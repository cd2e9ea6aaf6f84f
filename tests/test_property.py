"""Property-based differential tests: hypothesis generates small programs and inputs.

A program is a tuple of ``(op, constant)`` steps interpreted by one Python
function; under dynacap the loop over the (guarded, constant) steps is
unrolled, tensor steps go into the graph, and ``print``/``.item()``/
data-dependent branches are graph breaks with resume functions.  Every
generated program must give the eager result, printed output and mutated
inputs.
"""
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from differential import run_differential

UNARY = ["sin", "cos", "relu", "neg", "abs", "exp_clamped", "t_pair"]
BINARY = ["add_const", "mul_const", "add_y", "mul_y", "sub_y_inplace"]
BREAKS = ["print", "item", "branch"]


def program(x, y, steps):
    acc = []
    for op, c in steps:
        if op == "sin":
            x = torch.sin(x)
        elif op == "cos":
            x = x.cos()
        elif op == "relu":
            x = torch.relu(x)
        elif op == "neg":
            x = -x
        elif op == "abs":
            x = abs(x)
        elif op == "exp_clamped":
            x = torch.exp(x.clamp(max=3.0))
        elif op == "t_pair":
            x = (x.t() @ x).t()[: x.shape[0], : x.shape[1]] if x.shape[0] == x.shape[1] else x * 1.5
        elif op == "add_const":
            x = x + c
        elif op == "mul_const":
            x = x * c
        elif op == "add_y":
            x = x + y
        elif op == "mul_y":
            x = x * y
        elif op == "sub_y_inplace":
            y.sub_(c)
        elif op == "print":
            print("step", c, tuple(x.shape))
        elif op == "item":
            acc.append(round(x.sum().item(), 3))
        elif op == "branch":
            x = x * 2 if x.mean() > c else x - 1
        acc.append(op)
    return x, y, acc


steps = st.lists(
    st.tuples(st.sampled_from(UNARY + BINARY + BREAKS), st.sampled_from([0.5, 1.0, 2.0, -1.0])),
    min_size=1,
    max_size=8,
).map(tuple)
shapes = st.sampled_from([(3,), (2, 2), (3, 3), (2, 3)])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=steps, shape=shapes, seed=st.integers(0, 2**16))
def test_generated_programs_match_eager(steps, shape, seed):
    x, y = inputs(shape, seed)
    run_differential(program, x, y, steps, rtol=1e-4, atol=1e-5, check_cache=False)


def inputs(shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g), torch.randn(*shape, generator=g)


_LINES = {
    "sin": "x = torch.sin(x)",
    "cos": "x = x.cos()",
    "relu": "x = torch.relu(x)",
    "neg": "x = -x",
    "abs": "x = abs(x)",
    "exp_clamped": "x = torch.exp(x.clamp(max=3.0))",
    "t_pair": "x = x.t().contiguous().t() * 1.5",
    "add_const": "x = x + {c}",
    "mul_const": "x = x * {c}",
    "add_y": "x = x + y",
    "mul_y": "x = x * y",
    "sub_y_inplace": "y.sub_({c})",
    "print": "print('step', {c}, tuple(x.shape))",
    "item": "acc.append(round(x.sum().item(), 3))",
    "branch": "x = x * 2 if x.mean() > {c} else x - 1",
}


def straight_line(steps):
    """The same program without the loop: each break is resumed in a resume function."""
    body = "\n".join("    " + _LINES[op].format(c=c) + f"\n    acc.append({op!r})" for op, c in steps)
    source = f"def generated(x, y):\n    acc = []\n{body}\n    return x, y, acc\n"
    namespace = {"torch": torch}
    exec(compile(source, "<hypothesis program>", "exec"), namespace)
    return namespace["generated"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=steps, shape=shapes, seed=st.integers(0, 2**16))
def test_generated_straight_line_programs_match_eager(steps, shape, seed):
    x, y = inputs(shape, seed)
    run_differential(straight_line(steps), x, y, rtol=1e-4, atol=1e-5)


def helper_square_print(v, c):
    w = v * v
    print("helper", c)
    return w + c


_BLOCKS = {
    "plain": "{body}",
    "for": "for _i in range(2):\n{body_indented}",
    "no_grad": "with torch.no_grad():\n{body_indented}",
    "helper": "x = helper_square_print(x, {c})\n{body}",
    "try": "try:\n{body_indented}\nexcept ZeroDivisionError:\n    x = x - 100",
}


def structured(steps, blocks):
    """Straight-line steps grouped into blocks (loops, no_grad, try, inlined helper calls)."""
    chunks = []
    per = max(1, len(steps) // max(1, len(blocks)))
    for k, block in enumerate(blocks):
        part = steps[k * per:(k + 1) * per] if k < len(blocks) - 1 else steps[k * per:]
        body = "\n".join(_LINES[op].format(c=c) + f"\nacc.append({op!r})" for op, c in part) or "pass"
        indented = "\n".join("    " + line for line in body.splitlines())
        c = part[0][1] if part else 1.0
        chunks.append(_BLOCKS[block].format(body=body, body_indented=indented, c=c))
    text = "\n".join(chunks)
    source = "def generated(x, y):\n    acc = []\n" + "\n".join("    " + line for line in text.splitlines()) \
        + "\n    return x, y, acc\n"
    namespace = {"torch": torch, "helper_square_print": helper_square_print}
    exec(compile(source, "<hypothesis structured program>", "exec"), namespace)
    return namespace["generated"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=steps, blocks=st.lists(st.sampled_from(sorted(_BLOCKS)), min_size=1, max_size=3),
       shape=shapes, seed=st.integers(0, 2**16), grad=st.booleans())
def test_generated_structured_programs_match_eager(steps, blocks, shape, seed, grad):
    x, y = inputs(shape, seed)
    x.requires_grad_(grad)
    run_differential(structured(steps, blocks), x, y, rtol=1e-4, atol=1e-5, check_cache=False)
