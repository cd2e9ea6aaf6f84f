"""The C guard programs of real captures are what the lowering made before it was made cheaper (issue 11).

For each capture below (construct programs, tiny HuggingFace models, dynamic shapes, timm's convnext_tiny
when timm is installed) every guard program made is written out as text: the data handed to
``_C.GuardProgram`` (each step and each check, objects named by type and first appearance), whether a
Python fallback came with it, its readable lines (``CompiledGuard.program``), ``describe()``, and the
guards' Python form: each one's constants and the generated check of them all (``CompiledGuard.source``).
``guard_lowering_expected.json`` holds that text as the lowering of commit f17479e made it (the
per-guard one).  Regenerate it (``PYTHONPATH=. python3 tests/test_guard_lowering.py --write``) only
when *what is guarded* changes (values/, interpreter/): a change in how guards are lowered must
leave it as it is.  Cases whose text depended on the process (string hashing: set order) were left
out when it was written (``--write`` runs twice under different hash seeds).
"""
from __future__ import annotations

import builtins
import hashlib
import json
import os
import pathlib
import re
import subprocess
import sys
import types

import pytest
import torch

import dynacap
import dynacap.capture as capture
from dynacap.guards import check
from dynacap.guards.guard import TensorSpec, WeakGuarded

EXPECTED = pathlib.Path(__file__).with_name("guard_lowering_expected.json")
#: Cases large enough to be kept as a digest of their text (and its line count).
DIGESTED = ("transformers_bert", "transformers_gpt2", "transformers_vit", "timm_convnext_tiny",
            "timm_vit_small_patch16_224")


class _Names:
    """Objects of a program named by kind and first appearance, so the text is the same in every process."""

    def __init__(self):
        self.seen: dict[int, str] = {}
        self.held: list = []  # keeps each named object alive: ids stay unique while naming

    def __call__(self, obj) -> str:
        if obj is None or type(obj) in (bool, int, float, complex, str, bytes, torch.dtype, torch.device):
            return repr(obj)
        if type(obj) in (tuple, list):
            inner = ", ".join(self(x) for x in obj)
            return f"({inner})" if type(obj) is tuple else f"[{inner}]"
        if type(obj) is TensorSpec:
            return repr(obj)
        if type(obj) is WeakGuarded:
            return f"weak {self(obj())}"
        if obj is builtins.__dict__:
            return "<builtins>"
        if isinstance(obj, type):
            return f"<class {obj.__qualname__}>"
        if isinstance(obj, (types.FunctionType, types.BuiltinFunctionType)) and obj.__name__ != "<lambda>":
            return f"<function {obj.__qualname__}>"
        if id(obj) not in self.seen:
            self.seen[id(obj)] = f"<{type(obj).__name__} #{len(self.seen)}>"
            self.held.append(obj)
        return self.seen[id(obj)]


_ADDRESS = re.compile(r"(0x|___class_)[0-9a-f]+")


def _program_text(steps, checks, fallback, guard) -> list[str]:
    name = _Names()
    out = [f"step {i}: {op} {base} {name(arg)}" for i, (op, base, arg) in enumerate(steps)]
    out += [f"check {op} {src} {name(a)} {name(b)} {name(ints)}" for op, src, a, b, ints in checks]
    out.append(f"fallback: {fallback is not None}")
    out += ["line: " + _ADDRESS.sub(r"\1?", line) for line in guard.program]
    out += ["guard: " + _ADDRESS.sub(r"\1?", line) for line in guard.describe()]
    out += ["constants: " + _ADDRESS.sub(r"\1?", ", ".join(f"{k}={name(v)}" for k, v in g.constants.items()))
            for g in guard.guards]
    out += ["python: " + _ADDRESS.sub(r"\1?", line) for line in guard.source.splitlines()]
    return out


def _programs(run, monkeypatch) -> list[str]:
    """The text of every guard program ``run()`` makes, in order."""
    made = []
    real_program, real_compile = check.GuardProgram, capture.compile_guards

    def program(steps, checks, fallback):
        made.append((steps, checks, fallback))
        return real_program(steps, checks, fallback)

    texts = []

    def compile_guards(*args, **kwargs):
        guard = real_compile(*args, **kwargs)
        texts.extend(_program_text(*made[-1], guard))
        return guard

    dynacap.reset()
    monkeypatch.setattr(check, "GuardProgram", program)
    monkeypatch.setattr(capture, "compile_guards", compile_guards)
    try:
        run()
    finally:
        monkeypatch.undo()
        dynacap.reset()
    return texts


# -- the captures ----------------------------------------------------------------------------------
def _construct_names() -> list[str]:
    import constructs

    return sorted(constructs.PROGRAMS)[::6]


def _run_construct(name):
    import constructs

    program = constructs.PROGRAMS[name]
    captured = dynacap.optimize(program.fn, backend="eager")
    for other in (False, True) if program.other is not None else (False,):
        try:
            captured(*program.build(other))
        except Exception:  # a program raising on purpose: its guards were made all the same
            pass


def _run_transformers(name):
    pytest.importorskip("transformers")
    from transformers_models import build

    model, kwargs = build(name)
    with torch.no_grad():
        dynacap.optimize(model.eval(), backend="eager")(**kwargs)


def _run_dynamic():
    def f(x, y, n):
        return (x * y[: x.shape[0]]).sum(0) + n, x.view(-1, 2).shape[0]

    captured = dynacap.optimize(f, backend="eager", dynamic=True)
    captured(torch.randn(6, 4), torch.randn(8, 4), 3)
    captured(torch.randn(5, 4), torch.randn(9, 4), 4)


def _run_automatic_dynamic():
    scale = [2.0, -0.0, float("nan")]

    def f(x, k):
        return x.reshape(k, -1) * scale[0] + scale[1], x.shape[0] // k

    captured = dynacap.optimize(f, backend="eager")
    for n in (4, 6, 8):
        captured(torch.randn(n, 3), 2)


class _Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.norm = torch.nn.LayerNorm(4)
        self.scale = 0.5

    def forward(self, x):
        return self.norm(self.lin(x)) * self.scale


def _run_modules():
    # (No module with hooks: its guards name the hooks' handle ids, a count of every hook the process made.)
    torch.manual_seed(0)
    with torch.no_grad():
        dynacap.optimize(torch.nn.Sequential(_Block(), torch.nn.ReLU(), _Block()), backend="eager")(torch.randn(2, 4))
        with dynacap.config.patch(share_graphs_across_instances=False):
            dynacap.optimize(_Block(), backend="eager")(torch.randn(2, 4))


def _run_timm(name):
    from dynacap.harness import stubs

    stubs.finder().add("torchvision")
    stubs.finder().add("PIL")
    timm = pytest.importorskip("timm")
    torch.manual_seed(0)
    model = timm.create_model(name).eval()
    with torch.no_grad():
        dynacap.optimize(model, backend="eager")(torch.randn(1, 3, 224, 224))


def _cases() -> dict:
    cases = {f"construct_{name}": (lambda name=name: _run_construct(name)) for name in _construct_names()}
    cases.update(transformers_bert=lambda: _run_transformers("bert"), transformers_vit=lambda: _run_transformers("vit"),
                 transformers_gpt2=lambda: _run_transformers("gpt2"), dynamic=_run_dynamic, modules=_run_modules,
                 automatic_dynamic=_run_automatic_dynamic, timm_convnext_tiny=lambda: _run_timm("convnext_tiny"),
                 timm_vit_small_patch16_224=lambda: _run_timm("vit_small_patch16_224"))
    return cases


def _expected_form(name: str, texts: list[str]):
    if name in DIGESTED:
        return {"sha256": hashlib.sha256("\n".join(texts).encode()).hexdigest(), "lines": len(texts)}
    return texts


def _expected() -> dict:
    return json.loads(EXPECTED.read_text())


@pytest.mark.parametrize("name", sorted(_expected()) if EXPECTED.exists() else [])
def test_guard_program_is_what_the_per_guard_lowering_made(name, monkeypatch):
    want = _expected()[name]
    got = _expected_form(name, _programs(_cases()[name], monkeypatch))
    if isinstance(want, dict):
        assert got == want, f"{name}: the program text changed (digest of {want['lines']} lines)"
    else:
        assert got == want


def test_the_expectations_cover_every_kind_of_capture():
    """The expectations are not empty: programs with tensors, modules, symbolic shapes and fallbacks."""
    text = "\n".join(line for case in _expected().values() if isinstance(case, list) for line in case)
    for needle in ("has parameters", "tensor L['x'] matches", "check 19 ", "fallback: True", "is (weakly)"):
        assert needle in text, needle
    assert len(_expected()) > 80


def _write() -> None:
    """Write the expectations from two processes under different hash seeds; keep the cases they agree on."""
    runs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        dump = EXPECTED.with_suffix(f".{seed}.tmp")
        subprocess.run([sys.executable, __file__, "--dump", str(dump)], env=env, check=True, stdout=subprocess.DEVNULL)
        runs.append(json.loads(dump.read_text()))
        dump.unlink()
    kept = {name: texts for name, texts in runs[0].items() if runs[1].get(name) == texts}
    print(f"{len(kept)} cases kept of {len(runs[0])}", file=sys.stderr)
    EXPECTED.write_text(json.dumps(kept, indent=0, sort_keys=True) + "\n")


def _dump(path: str) -> None:
    import warnings

    warnings.simplefilter("ignore")
    out = {}
    for name, run in _cases().items():
        patch = pytest.MonkeyPatch()
        try:
            out[name] = _expected_form(name, _programs(run, patch))
        except pytest.skip.Exception:
            continue
    pathlib.Path(path).write_text(json.dumps(out))  # not stdout: programs print


if __name__ == "__main__":
    _write() if sys.argv[1:] == ["--write"] else _dump(sys.argv[2])
