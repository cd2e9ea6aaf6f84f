"""Readable rewritten code and FX tools in ``explain`` (issue 13, items 5 and 6).

``explain(fn)(...).code`` is the rewritten frames, resume functions and
guards as Python source: checked to be valid Python for every break
program, to name the graph and resume calls, and differentially: the
decompiled rewritten frame, run with the objects it names, gives eager's
result.
"""
import contextlib
import io
import re

import pytest
import torch

import dynacap
from tests.break_programs import PROGRAMS
from tests.differential import assert_same


@pytest.fixture(autouse=True)
def _fresh():
    dynacap.reset()
    yield
    dynacap.reset()


def one_break(x, y):
    z = torch.sin(x) + y
    print("between graphs")
    return z.cos() * 2, z


def defs(code: str) -> list[str]:
    return re.findall(r"^def (\w+)\(", code, re.M)


def test_code_of_a_function_with_one_break_shows_frame_resume_and_guards():
    with contextlib.redirect_stdout(io.StringIO()):
        out = dynacap.explain(one_break)(torch.randn(3), torch.randn(3))
    names = defs(out.code)
    assert names[0] == "one_break"
    resume = next(n for n in names if n.startswith("one_break_resumed_at_line_"))
    assert f"return {resume}(" in out.code  # the rewritten frame calls its resume function
    assert "compiled_graph_1(x, y)" in out.code and "compiled_graph_2(" in out.code
    assert names.count("___guard") == 2
    assert "print('between graphs')" in out.code.replace("___source0 = print\n", "").replace(
        "___source0('between graphs')", "print('between graphs')")
    compile(out.code, "<explain code>", "exec")


def _run_decompiled(fn, out, name, *args):
    """The decompiled rewritten frame ``name``, executed with the objects its source names."""
    source = out.code.split(f"def {name}(", 1)[1].split("\n\n", 1)[0]
    namespace = dict(fn.__globals__)
    namespace.update(out.code_objects)
    exec(compile(f"def {name}(" + source, "<decompiled>", "exec"), namespace)
    return namespace[name](*args)


def test_the_decompiled_rewritten_frame_runs_like_eager():
    x, y = torch.randn(3), torch.randn(3)
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        expected = one_break(x, y)
        out = dynacap.explain(one_break)(x, y)
        assert_same(expected, _run_decompiled(one_break, out, "one_break", x, y))
    assert printed.getvalue().count("between graphs") == 3


def fully_captured(x, scale=2.0):
    return {"out": torch.relu(x) * scale, "n": 3}


def test_a_fully_captured_frame_returns_its_rebuilt_value():
    x = torch.randn(4)
    out = dynacap.explain(fully_captured)(x)
    assert defs(out.code) == ["fully_captured", "___guard"]
    assert "{'out': ___graph_out[0], 'n': 3}" in out.code
    assert_same(fully_captured(x), _run_decompiled(fully_captured, out, "fully_captured", x, 2.0))


@pytest.mark.parametrize("name", [p[0] for p in PROGRAMS if p[0] != "eager_part_raises"])
def test_code_of_every_break_program_is_python_with_no_unknown_instruction(name):
    _, fn, make = next(p for p in PROGRAMS if p[0] == name)
    args, kwargs = make()
    with contextlib.redirect_stdout(io.StringIO()):
        out = dynacap.explain(fn)(*args, **kwargs)
    compile(out.code, name, "exec")
    assert not re.findall(r"^\s*# [A-Z_]{4,}\b", out.code, re.M), out.code
    assert len(defs(out.code)) >= 2
