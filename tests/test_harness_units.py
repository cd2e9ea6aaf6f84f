"""Unit tests of the corpus harness pieces that run in-process (no workers)."""
from __future__ import annotations

import dataclasses
import json
import math
import os
import re

import pytest
import torch
from torch import nn

from dynacap.harness import charts, compare, discovery, inference, results, sandbox, summary, values
from dynacap.harness.compilers import parse_break_message
from dynacap.harness.report import render_html, render_md
from dynacap.harness.stubs import StubModule, make_stub_class

FIXTURES = os.path.join(os.path.dirname(__file__), "corpus_fixtures")


# ----------------------------------------------------------------- discovery
def test_discovery_finds_fixture_cases_without_importing():
    d = discovery.discover([FIXTURES])
    ids = {c.id for c in d.cases}
    assert len(d.projects) >= 8
    # found through the project's own intermediate base class
    assert "srclayout_relative/src/tinynet/model.py::TinyNet" in ids
    # function entry points come from the project's dynacap_cases.jsonl
    fn = [c for c in d.cases if c.kind == "function"]
    assert {c.qualname for c in fn} == {"gelu_residual", "normalize_rows"}
    # the manifest entry replaces the discovered case (per-case timeout)
    sleeper = [c for c in d.cases if c.id == "hangs/sleeper.py::Sleeper"]
    assert len(sleeper) == 1 and sleeper[0].timeout == 8
    # files that raise on import are still discovered (ast only)
    assert "import_fails/gpu_only.py::NeverLoads" in ids


def test_discovery_ast_rules(tmp_path):
    proj = tmp_path / "proj"
    (proj / "pkg").mkdir(parents=True)
    (proj / "setup.py").write_text("raise SystemExit('never imported')\n")
    (proj / "pkg" / "__init__.py").write_text("")
    (proj / "pkg" / "a.py").write_text(
        "import torch\nfrom torch.nn import Module\nimport torch.nn as nn\n"
        "class Base(Module):\n    pass\n"                       # no forward anywhere: skipped
        "class Mid(Base):\n    def forward(self, x): return x\n"
        "class Leaf(Mid):\n    pass\n"                           # inherits forward from Mid
        "class Seq(nn.Sequential):\n    pass\n"                  # torch base has forward
        "class NotAModule(object):\n    def forward(self, x): return x\n")
    (proj / "pkg" / "b.py").write_text("from .a import Leaf\nclass Deeper(Leaf):\n    pass\n")
    (proj / "pkg" / "broken.py").write_text("def (:\n")
    d = discovery.discover([str(proj)])
    names = sorted(c.qualname for c in d.cases)
    assert names == ["Deeper", "Leaf", "Mid", "Seq"]
    assert d.parse_errors and d.parse_errors[0]["file"].endswith("broken.py")


def test_manifest_parsing(tmp_path):
    m = tmp_path / "cases.jsonl"
    m.write_text("\n".join([
        json.dumps({"module": "torch.nn", "class": "Linear", "init_args": [4, 2], "project": "tnn"}),
        json.dumps({"module": "torch.nn", "class": "Linear", "init_args": [8, 2], "project": "tnn"}),
        "# comment",
        json.dumps({"file": "x.py"}),
        "{not json",
    ]) + "\n")
    d = discovery.discover([str(m)])
    assert [c.id for c in d.cases] == ["tnn/torch.nn::Linear", "tnn/torch.nn::Linear#1"]
    assert len(d.manifest_errors) == 2
    assert discovery.sample(d.cases, 1, seed=3) == discovery.sample(d.cases, 1, seed=3)


# ----------------------------------------------------------------- values, stubs
def test_value_specs_are_seeded_and_typed():
    spec = [{"tensor": [2, 3]}, {"tuple": [1, {"tensor": [4], "dtype": "int64", "high": 5}]},
            {"dict": {"m": {"tensor": [2], "dtype": "bool", "fill": True}}}, {"config": {"hidden": 8}}]
    a = values.build(spec, inference.seeded(0))
    b = values.build(spec, inference.seeded(0))
    assert torch.equal(a[0], b[0]) and a[0].shape == (2, 3)
    assert isinstance(a[1], tuple) and a[1][1].dtype == torch.int64 and int(a[1][1].max()) < 5
    assert a[2]["m"].all()
    cfg = a[3]
    assert cfg.hidden == 8 and cfg.num_heads == 2 and cfg.dropout == 0.0
    assert values.to_spec(cfg) == {"config": {"hidden": 8, "num_heads": 2, "dropout": 0.0}}
    # keyword arguments are a mapping of specs, even when a name looks like a spec key
    kw = values.build_kwargs({"config": {"config": {"x": 1}}})
    assert kw["config"].x == 1
    assert values.describe((torch.zeros(2, 3), [1])) == {"tuple": ["float32[2, 3]", [1]]}


def test_stub_module_is_permissive():
    mod = StubModule("fancy")
    Base = mod.layers.Base

    class Child(Base):
        pass

    assert Child() is not None
    deco = mod.register

    @deco
    def f():
        return 3
    assert f() == 3
    assert not make_stub_class("x")()
    with pytest.raises(AttributeError):
        mod.__wrapped__  # noqa: B018 - dunders stay missing


# ----------------------------------------------------------------- inference
class _Mnist(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, stride=2, padding=1)
        self.fc = nn.Linear(4 * 14 * 14, 3)

    def forward(self, x):
        return self.fc(torch.flatten(self.conv(x), 1))


class _Tokens(nn.Module):
    def __init__(self, vocab_size, dim):
        super().__init__()
        self.emb = nn.Embedding(vocab_size, dim)

    def forward(self, tokens):
        return self.emb(tokens).sum(1)


class _Kernels(nn.Module):
    def __init__(self, channels, kernel_sizes):
        super().__init__()
        self.convs = nn.ModuleList(nn.Conv1d(channels, channels, k, padding=k // 2) for k in kernel_sizes)

    def forward(self, x):
        return sum(c(x) for c in self.convs)


class _NeedsRank5(nn.Module):
    def forward(self, x):
        b, c, d, h, w = x.shape
        return x.mean()


@pytest.mark.parametrize("cls, check", [
    (_Mnist, lambda f: f.args[0]["tensor"] == [2, 1, 28, 28]),
    (_Tokens, lambda f: f.args[0]["dtype"] == "int64"),
    (_Kernels, lambda f: isinstance(f.init_kwargs["kernel_sizes"], list)),
    (_NeedsRank5, lambda f: len(f.args[0]["tensor"]) == 5),
])
def test_inference_finds_inputs(cls, check):
    found = inference.search(cls, "module", seed=0, budget_s=20)
    assert check(found), found


def test_inference_gives_up_with_first_error():
    class Broken(nn.Module):
        def forward(self, x):
            raise RuntimeError("broken on purpose")

    with pytest.raises(inference.Failed) as ei:
        inference.search(Broken, "module", seed=0, budget_s=10)
    assert "broken on purpose" in ei.value.message and ei.value.tries <= 20


# ----------------------------------------------------------------- compare
@dataclasses.dataclass
class _Out:
    logits: torch.Tensor
    aux: dict


def test_compare_nested_with_tolerances():
    t = torch.randn(3, 4)
    exp = (_Out(t, {"a": [t * 2, 1, None]}), 2.5)
    same = compare.compare((_Out(t + 1e-6, {"a": [t * 2, 1, None]}), 2.5), exp)
    assert same.same and 0 < same.max_error < 1e-5
    off = compare.compare((_Out(t + 1e-2, {"a": [t * 2, 1, None]}), 2.5), exp)
    assert not off.same and off.max_error == pytest.approx(1e-2, rel=1e-3)
    assert not compare.compare((_Out(t, {"a": [t * 2, 2, None]}), 2.5), exp).same
    assert not compare.compare([t], (t,)).same                    # structure
    assert not compare.compare(t.double(), t).same                # dtype
    nan = torch.tensor([float("nan"), 1.0])
    assert compare.identical(nan, nan.clone())
    assert math.isinf(compare.compare(torch.tensor([float("nan")]), torch.tensor([1.0])).max_error)
    half = torch.ones(4, dtype=torch.float16)
    assert compare.compare(half + 1e-3, half).same                # low-precision tolerance


# ----------------------------------------------------------------- compilers' log parsing
def test_parse_break_message():
    msg = ("Graph break in user code at /p/gates.py:11\nGraph Break Reason: Encountered graph break when "
           "attempting to trace CALL: a function call, e.g. f(x, y):\n\nFailed to trace builtin operator\n"
           "  Explanation: Dynamo does not know how to trace builtin operator `print`\n  Hint: x\n\n"
           "User code traceback:\n  File \"/p/gates.py\", line 11, in forward\n")
    br = parse_break_message(msg)
    assert br["location"] == "/p/gates.py:11"
    assert br["reason"].endswith("Failed to trace builtin operator")
    assert "print" in br["detail"]


# ----------------------------------------------------------------- sandbox env
def test_child_env_is_scrubbed(tmp_path, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_secret")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    env = sandbox.child_env(str(tmp_path))
    assert "GITHUB_TOKEN" not in env and "AWS_SECRET_ACCESS_KEY" not in env
    assert env["HOME"] == str(tmp_path) and env["TMPDIR"].startswith(str(tmp_path))
    assert not any("secret" in v for v in env.values())


# ----------------------------------------------------------------- results, summary, reports
def _rec(cid, project, st_a, st_b, graphs=1, breaks=0, reason=None):
    def r(st):
        d = {"status": st, "graph_count": graphs, "graph_break_count": breaks, "first_call_s": 0.2,
             "median_s": 0.002, "eager_median_s": 0.001, "overhead": 2.0, "max_error": 0.0}
        if reason:
            d["break_reasons"] = [{"reason": reason, "location": f"/x/{project}.py:3"}]
        return d
    prep = {"status": "ok" if st_a not in ("eager_error", "import_error") else st_a}
    return {"id": cid, "project": project, "prepare": prep,
            "results": {"dynacap": r(st_a), "dynamo": r(st_b)},
            "config": {"backend": "eager", "fullgraph": False, "seed": 0}}


def test_summary_and_reports():
    recs = [_rec("p1/a.py::A", "p1", "ok", "ok"), _rec("p1/a.py::B", "p1", "ok", "ok", 2, 1, "data-dependent"),
            _rec("p2/b.py::C", "p2", "compile_error", "ok"), _rec("p3/c.py::D", "p3", "eager_error", "eager_error")]
    s = summary.summarize(recs)
    a, b = s["per_compiler"]["dynacap"], s["per_compiler"]["dynamo"]
    assert a["ok"] == 2 and b["ok"] == 3 and a["runnable"] == 3
    assert a["pct_pass"] == 50.0 and b["pct_pass_runnable"] == 100.0
    assert a["projects_all_pass"] == 1 and b["projects_all_pass"] == 2
    assert a["one_graph"] == 1
    assert a["break_reasons"][0]["reason"] == "data-dependent" and a["break_reasons"][0]["locations"]
    assert s["comparison"]["same_status"] == 3
    md = render_md(recs, s, {"backend": "eager", "fullgraph": False, "command": "dynacap corpus x"})
    assert "## Side by side: dynacap vs dynamo" in md and "| compile_error | ok | 1 |" in md
    html = render_html(recs, s, {"backend": "eager", "fullgraph": False})
    assert html.count("<svg") >= 4
    assert not re.search(r"(src|href)=['\"]?https?:", html)        # nothing loaded from the network
    assert "<script" not in html


def test_charts_are_wellformed_svg():
    import xml.etree.ElementTree as ET
    for svg in (charts.hbar([("a <b>", {"dynacap": 3, "dynamo": 1})], ["dynacap", "dynamo"], "t"),
                charts.vbar(["0", "1"], {"dynacap": [1, 2]}, "t"),
                charts.stacked([("dynacap", {"ok": 3, "crash": 1})], ["ok", "crash"], "t")):
        ET.fromstring(svg)


def test_results_reader_survives_torn_lines(tmp_path):
    w = results.ResultWriter(str(tmp_path), resume=False)
    w.write({"id": "a", "results": {"dynamo": {"status": "ok"}}, "config": {"backend": "eager",
             "fullgraph": False, "seed": 0}})
    w.write({"id": "b", "results": {"dynamo": {"status": "crash"}}, "config": {}})
    w.close()
    with open(tmp_path / "results.jsonl", "a") as f:
        f.write('{"id": "c", "resul')                 # killed mid-write
    recs = results.read_records(str(tmp_path / "results.jsonl"))
    assert [r["id"] for r in recs] == ["a", "b"]
    cfg = {"backend": "eager", "fullgraph": False, "seed": 0}
    assert results.is_finished(recs[0], ["dynamo"], cfg)
    assert not results.is_finished(recs[0], ["dynamo", "dynacap"], cfg)
    assert not results.is_finished(recs[1], ["dynamo"], cfg)     # other settings


def test_dynacap_adapter_reads_its_stats_from_the_run_without_capturing_again(capsys):
    from dynacap.harness.compilers import DynacapAdapter

    class WithBreak(torch.nn.Module):
        def forward(self, x):
            y = x.sin()
            print("break")
            return y.cos()

    adapter = DynacapAdapter("eager")
    adapter.setup()
    model = WithBreak()
    compiled = adapter.compile(model)
    x = torch.randn(3)
    assert torch.equal(compiled(x), model(x))
    frames = adapter.record.frames
    stats = adapter.stats()
    assert (stats["graph_count"], stats["graph_break_count"]) == (2, 1), stats
    assert "print" in stats["break_reasons"][0]["reason"]
    assert stats["op_count"] == 2
    compiled(x)  # a cache hit: nothing captured again
    assert adapter.record.frames == frames and adapter.stats() == stats
    adapter.reset()
