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


def _run_decompiled(fn, out, name, *args, **kwargs):
    """The decompiled rewritten frame ``name``, executed with the objects its source names."""
    source = out.code.split(f"\ndef {name}(", 1)[1].split("\n\n", 1)[0]
    namespace = dict(fn.__globals__)
    namespace.update(out.code_objects)
    exec(compile(f"def {name}(" + source, "<decompiled>", "exec"), namespace)
    return namespace[name](*args, **kwargs)


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


# -- item 6: FX tools on captured graphs ------------------------------------------------------
def conv_model():
    from tests.test_export import ConvBnLinear

    torch.manual_seed(0)
    return ConvBnLinear().eval()


def test_explain_shows_propagated_shapes_static_and_symbolic():
    m = conv_model()
    text = str(dynacap.explain(m)(torch.randn(2, 3, 8, 8)))
    assert re.search(r"%conv2d : .*# f32\[2, 4, 6, 6\]$", text, re.M), text
    assert re.search(r"%linear : .*# f32\[2, 5\]$", text, re.M), text
    x = torch.randn(5, 3, 8, 8)
    dynacap.mark_dynamic(x, 0)
    text = str(dynacap.explain(m)(x))
    assert re.search(r"%linear : .*# f32\[s\d+, 5\]$", text, re.M), text


def test_flop_count_per_graph_matches_torch_flop_counter_on_eager():
    from torch.utils.flop_counter import FlopCounterMode

    m = conv_model()
    x = torch.randn(2, 3, 8, 8)
    with FlopCounterMode(display=False) as counter:
        m(x)
    out = dynacap.explain(m)(x)
    assert out.flops == [counter.get_total_flops()] and out.flops[0] > 0
    assert f"Graph 1 ({counter.get_total_flops()} FLOPs):" in str(out)


def test_conv_bn_folding_of_captured_and_exported_graphs_stays_equal_to_eager():
    from dynacap.fx_tools import fold_conv_bn

    m = conv_model()
    x = torch.randn(2, 3, 8, 8)
    seen = []

    def recording(gm, example_inputs):
        seen.append((gm, list(example_inputs)))
        return gm.forward

    dynacap.optimize(m, backend=recording)(x)
    gm, inputs = seen[0]
    folded, count = fold_conv_bn(gm, inputs)
    assert count == 1 and not any("batch_norm" in str(n.target) for n in folded.graph.nodes)
    at = next(i for i, v in enumerate(inputs) if v is x)
    exported, count = fold_conv_bn(dynacap.export(m, (x,)).module())
    assert count == 1 and not any("batch_norm" in str(n.target) for n in exported.graph.nodes)
    for seed in range(3):
        torch.manual_seed(seed)
        x2 = torch.randn(2, 3, 8, 8)
        args = list(inputs)
        args[at] = x2
        assert_same(m(x2), folded(*args)[0], rtol=1e-5, atol=1e-5)
        assert_same(m(x2), exported(x2), rtol=1e-5, atol=1e-5)
    assert_same(m(x), gm(*inputs)[0])  # the captured graph itself is untouched


def test_training_batch_norm_is_not_folded():
    from dynacap.fx_tools import fold_conv_bn

    m = conv_model().train()
    _, count = fold_conv_bn(dynacap.export(m, (torch.randn(2, 3, 8, 8),)).module())
    assert count == 0


def test_each_graph_is_drawn_as_svg_and_the_report_as_html():
    import xml.etree.ElementTree as ET

    with contextlib.redirect_stdout(io.StringIO()):
        out = dynacap.explain(one_break)(torch.randn(3), torch.randn(3))
    ns = "{http://www.w3.org/2000/svg}"
    for i, gm in enumerate(out.graphs):
        root = ET.fromstring(out.svg(i))
        nodes = list(gm.graph.nodes)
        assert len(root.findall(f".//{ns}rect")) == len(nodes)
        assert len(root.findall(f"{ns}line")) == sum(len(n.users) for n in nodes)
    labels = {t.text for t in ET.fromstring(out.svg(0)).iter(f"{ns}text")}
    assert {"sin", "add", "f32[3]"} <= labels, labels
    page = out.html()
    assert page.count("<svg") == out.graph_count == 2
    assert "Graph breaks" in page and "one_break_resumed_at_line_" in page and "FLOPs" in page


def test_cli_explain_writes_the_html_report(tmp_path, capsys):
    from dynacap.cli import main

    model = tmp_path / "cli_model.py"
    model.write_text(
        "import torch, torch.nn as nn\n"
        "class Net(nn.Module):\n"
        "    def __init__(self, c):\n"
        "        super().__init__(); self.conv = nn.Conv2d(3, c, 3); self.bn = nn.BatchNorm2d(c)\n"
        "    def forward(self, x):\n"
        "        y = torch.relu(self.bn(self.conv(x)))\n"
        "        print('mid')\n"
        "        return y.mean((2, 3))\n")
    page = tmp_path / "report.html"
    assert main(["explain", f"{model}:Net", "--init", "[4]", "--args", '[{"tensor": [2, 3, 8, 8]}]',
                 "--code", "--html", str(page)]) == 0
    printed = capsys.readouterr().out
    assert "Graph break count: 1" in printed and f"{model}:7" in printed
    assert "def forward_resumed_at_line_7(" in printed and "FLOPs" in printed
    text = page.read_text()
    assert text.count("<svg") == 2 and "print" in text


@pytest.mark.skipif("code" not in __import__("dynacap.logs").logs.CHANNELS,
                    reason="the `code` log channel is not in dynacap.logs yet (requests-export R3)")
def test_dynacap_logs_code_prints_each_entry_as_python(caplog):
    import logging

    with caplog.at_level(logging.DEBUG, logger="dynacap.code"), contextlib.redirect_stdout(io.StringIO()):
        dynacap.optimize(one_break, backend="eager")(torch.randn(3), torch.randn(3))
    text = "\n".join(r.getMessage() for r in caplog.records if r.name == "dynacap.code")
    assert "def one_break(x, y):" in text and "def one_break_resumed_at_line_" in text
    assert "def ___guard(L, G):" in text


@pytest.mark.parametrize("name", [p[0] for p in PROGRAMS if p[0] != "eager_part_raises" and not p[1].__closure__])
def test_every_break_programs_decompiled_frame_runs_like_eager(name):
    """The decompiled rewritten frame, run with the objects it names, gives eager's result and printed text."""
    from dynacap.decompile import identifier

    _, fn, make = next(p for p in PROGRAMS if p[0] == name)
    args, kwargs = make()
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        expected = fn(*args, **kwargs)
    args, kwargs = make()
    with contextlib.redirect_stdout(io.StringIO()):
        out = dynacap.explain(fn)(*args, **kwargs)
    args, kwargs = make()
    with contextlib.redirect_stdout(io.StringIO()) as replayed:
        got = _run_decompiled(fn, out, identifier(fn.__code__.co_name), *args, **kwargs)
    assert_same(expected, got)
    assert replayed.getvalue() == printed.getvalue()


FUZZ_SEEDS = [0, 1, 2, 3, 5, 8, 13, 21, 34, 55, 88, 93, 105, 122, 128, 143, 144, 233, 377, 610]


def test_code_of_generated_programs_is_python_and_runs_like_eager():
    """Fuzz programs (tests/fuzz): comprehensions, keyword-only and variadic parameters, closures, side
    effects on globals and arguments.  The decompiled top frame runs (in a fresh copy of the program's
    module) with eager's result, printed text and writes to its ``buf`` argument."""
    import types
    import warnings

    from tests.fuzz.grammar import ENTRY, generate
    from tests.fuzz.inputs import make_args

    def fresh(seed):
        module = types.ModuleType(f"fuzz_{seed}")
        exec(compile(generate(seed).source, f"<fuzz {seed}>", "exec"), module.__dict__)
        return module

    ran = 0
    for seed in FUZZ_SEEDS:
        eager_args = make_args(seed, 0)
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            try:
                expected = fresh(seed).__dict__[ENTRY](**eager_args)
            except Exception:
                continue  # a program that raises has no report
        if _holds_objects_of(expected, f"fuzz_{seed}"):
            continue  # an object of a class the program defines: each fresh module has its own class
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = dynacap.explain(fresh(seed).__dict__[ENTRY])(**make_args(seed, 0))
        compile(out.code, f"seed {seed}", "exec")
        assert not re.findall(r"^\s*# [A-Z_]{4,}\b", out.code, re.M), (seed, out.code)
        if f"\ndef {ENTRY}(" not in out.code:
            continue  # the frame runs as it is
        module = fresh(seed)
        args = make_args(seed, 0)
        with contextlib.redirect_stdout(io.StringIO()) as replayed:
            got = _run_decompiled(module.__dict__[ENTRY], out, ENTRY, **args)
        assert_same(expected, got, path=f"seed {seed}")
        assert replayed.getvalue() == printed.getvalue() and args["buf"].getvalue() == eager_args["buf"].getvalue()
        ran += 1
    assert ran >= 10


def _holds_objects_of(value, module: str) -> bool:
    """Whether ``value`` (a result, through tuples, lists and dicts) holds an object of a class of ``module``."""
    if isinstance(value, (tuple, list)):
        return any(_holds_objects_of(v, module) for v in value)
    if isinstance(value, dict):
        return any(_holds_objects_of(v, module) for v in value.values())
    return type(value).__module__ == module


def makes_a_function(x):
    def scale(z, k=2):
        return z * k

    return scale, x + 1


def test_a_frame_that_builds_a_function_decompiles_and_runs():
    """The rewritten frame loads ``types.FunctionType`` (a type whose ``__code__`` is a descriptor)."""
    x = torch.randn(3)
    out = dynacap.explain(makes_a_function)(x)
    assert "FunctionType(unhooked_scale, globals_of_" in out.code
    scale, y = _run_decompiled(makes_a_function, out, "makes_a_function", x)
    expected_scale, expected_y = makes_a_function(x)
    assert_same(expected_y, y)
    assert_same(expected_scale(y), scale(y))
    assert scale.__name__ == "scale" and scale.__defaults__ == (2,)


def test_code_that_cannot_be_shown_is_named_not_raised(monkeypatch):
    from dynacap import decompile

    def refuses(*args, **kwargs):
        raise RuntimeError("an opcode shape it does not know")

    monkeypatch.setattr(decompile, "decompile", refuses)
    out = dynacap.explain(fully_captured)(torch.randn(4))
    assert out.graph_count == 1
    assert "fully_captured: its rewritten code could not be shown as Python (RuntimeError" in out.code
