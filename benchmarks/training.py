"""Training steps per second: eager, dynacap and torch.compile, with and without compiled autograd.

One training step is ``loss = loss_fn(model(x), y); loss.backward();
opt.step(); opt.zero_grad()`` (Adam, foreach), optimized as one function.
For each case (an MLP, a small Transformer encoder) and each engine, the
same model and data start from the same parameters: the first step is timed
alone (it includes capture and compilation: ``first s``), then ``--steps``
steps are timed (``steps/s``, the best of ``--repeat`` runs).  Parameters
after the run are compared with eager's (``max diff``, after all the
steps); a dynacap engine more than ``TOLERANCE`` away, and more than twice
as far as torch.compile on the same backend, makes the exit status non-zero
(inductor's fused kernels round differently, and Adam carries that drift
from step to step; torch.compile's own differences are printed as notes).
``graphs/breaks`` come from each engine's own explain (dynacap:
``dynacap.explain``; Dynamo: ``torch._dynamo.explain``).
Each engine runs in a process of its own (``--one``): the autograd engine
binds each node type to the first compiled autograd that meets it, so
dynacap's and torch's cannot share a process; it also keeps caches apart.

Engines: ``eager``; ``dynacap <backend>`` and ``torch.compile <backend>``
for each ``--backends`` entry; ``+CA``: with compiled autograd
(``dynacap.config.compiled_autograd`` / ``torch._dynamo.config.compiled_autograd``).

Usage::

    PYTHONPATH=. python3 benchmarks/training.py                       # aot_eager and inductor (minutes)
    PYTHONPATH=. python3 benchmarks/training.py --quick               # aot_eager only, few steps
    PYTHONPATH=. python3 benchmarks/training.py --cases mlp --backends inductor --json out.json
"""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
import warnings

import torch
import torch.nn as nn

import dynacap


def _mlp():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    x = torch.randn(32, 64, generator=torch.Generator().manual_seed(1))
    y = torch.randn(32, 10, generator=torch.Generator().manual_seed(2))
    return model, x, y, nn.functional.mse_loss


class _Transformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(16, 32)
        self.encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, dropout=0.0, batch_first=True), num_layers=2,
            enable_nested_tensor=False)
        self.head = nn.Linear(32, 4)

    def forward(self, x):
        return self.head(self.encoder(self.embed(x)).mean(1))


def _transformer():
    torch.manual_seed(0)
    model = _Transformer()
    x = torch.randn(8, 12, 16, generator=torch.Generator().manual_seed(1))
    y = torch.randint(0, 4, (8,), generator=torch.Generator().manual_seed(2))
    return model, x, y, nn.functional.cross_entropy


CASES = {"mlp": _mlp, "transformer": _transformer}

#: Largest parameter difference from eager that needs no comparison with torch.compile's.
TOLERANCE = 1e-4


def train_step(model, opt, x, y, loss_fn):
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss


def _engines(backends):
    """(name, make the step function, context to run it in, explain) per engine."""
    engines = [("eager", lambda: train_step, contextlib.nullcontext, None)]
    for backend in backends:
        for ca in (False, True):
            suffix = " +CA" if ca else ""
            engines.append((f"dynacap {backend}{suffix}",
                            lambda b=backend: dynacap.optimize(train_step, backend=b),
                            lambda ca=ca: dynacap.config.patch(compiled_autograd=ca),
                            "dynacap"))
    for backend in backends:
        for ca in (False, True):
            suffix = " +CA" if ca else ""
            engines.append((f"torch.compile {backend}{suffix}",
                            lambda b=backend: torch.compile(train_step, backend=b),
                            lambda ca=ca: _dynamo_config(ca),
                            "dynamo"))
    return engines


def _dynamo_config(compiled_autograd: bool):
    import torch._dynamo as dynamo

    return dynamo.config.patch(compiled_autograd=compiled_autograd)


def _counts(kind, case):
    """(graphs, breaks) of one step under the engine's own explain, on fresh copies."""
    if kind is None:
        return None
    model, x, y, loss_fn = CASES[case]()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=True)
    if kind == "dynacap":
        out = dynacap.explain(train_step)(model, opt, x, y, loss_fn)
        return out.graph_count, out.graph_break_count
    import torch._dynamo as dynamo

    out = dynamo.explain(train_step)(model, opt, x, y, loss_fn)
    return out.graph_count, out.graph_break_count


def run_case(case, engine, steps, repeat, reference):
    name, make_step, config, kind = engine
    model, x, y, loss_fn = CASES[case]()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=True)
    with config():
        step = make_step()
        start = time.perf_counter()
        step(model, opt, x, y, loss_fn)
        first = time.perf_counter() - start
        best = float("inf")
        for _ in range(repeat):
            start = time.perf_counter()
            for _ in range(steps):
                step(model, opt, x, y, loss_fn)
            best = min(best, time.perf_counter() - start)
    params = [p.detach().clone() for p in model.parameters()]
    diff = 0.0 if reference is None else max((a - b).abs().max().item() for a, b in zip(reference, params))
    with config():
        counts = _counts(kind, case)
    return {"case": case, "engine": name, "first_s": first, "steps_per_s": steps / best, "max_diff": diff,
            "graphs_breaks": counts}, params


def run_one(case, engine_name, backends, steps, repeat, out_path) -> None:
    """The ``--one`` child: one engine on one case; results and final parameters to ``out_path``."""
    engine = next(e for e in _engines(backends) if e[0] == engine_name)
    result, params = run_case(case, engine, steps, repeat, None)
    torch.save({"result": result, "params": params}, out_path)


def _in_child(case, engine_name, args) -> tuple[dict, list]:
    import os
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "result.pt")
        command = [sys.executable, os.path.abspath(__file__), "--one", case, engine_name, out,
                   "--backends", args.backends, "--steps", str(args.steps), "--repeat", str(args.repeat),
                   "--threads", str(args.threads)]
        proc = subprocess.run(command, capture_output=True, text=True)
        if proc.returncode != 0:
            errors = [line for line in proc.stderr.splitlines() if "Error" in line or "Exception" in line]
            return {"case": case, "engine": engine_name, "error": (errors or ["(no message)"])[-1][:300]}, None
        data = torch.load(out)
    return data["result"], data["params"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default=",".join(CASES), help="comma list of: " + ", ".join(CASES))
    parser.add_argument("--backends", default="aot_eager,inductor")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="aot_eager only, 5 steps, 1 repeat")
    parser.add_argument("--json", help="write the results as JSON")
    parser.add_argument("--one", nargs=3, metavar=("CASE", "ENGINE", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.backends, args.steps, args.repeat = "aot_eager", 5, 1
    torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore")
    backends = [b for b in args.backends.split(",") if b]
    if args.one:
        run_one(*args.one[:2], backends, args.steps, args.repeat, args.one[2])
        return 0
    engines = _engines(backends)
    results, failures, notes = [], [], []
    for case in args.cases.split(","):
        reference = None
        for engine in engines:
            # Every engine takes the same number of steps, so its parameters are comparable with eager's.
            result, params = _in_child(case, engine[0], args)
            results.append(result)
            if params is None:
                (failures if engine[3] == "dynacap" else notes).append(
                    f"{case} / {result['engine']} failed: {result['error']}")
                print(f"{case:<12} {result['engine']:<26} FAILED: {result['error'][:100]}", flush=True)
                continue
            if reference is None:
                reference = params
            result["max_diff"] = max((a - b).abs().max().item() for a, b in zip(reference, params))
            gb = result["graphs_breaks"]
            print(f"{case:<12} {result['engine']:<26} {result['steps_per_s']:9.1f} steps/s  first "
                  f"{result['first_s']:7.2f} s  max diff {result['max_diff']:.1e}  graphs/breaks "
                  f"{'-' if gb is None else f'{gb[0]}/{gb[1]}'}", flush=True)
    for result in results:
        if result.get("max_diff", 0.0) <= TOLERANCE:
            continue
        text = f"{result['case']} / {result['engine']}: parameters differ from eager by {result['max_diff']:.2e}"
        if not result["engine"].startswith("dynacap"):
            notes.append(text)
            continue
        peer = result["engine"].replace("dynacap", "torch.compile", 1)
        peer_diff = next((r.get("max_diff") for r in results if r["case"] == result["case"] and r["engine"] == peer),
                         None)
        if peer_diff is not None and result["max_diff"] <= 2 * peer_diff:
            notes.append(f"{text} (torch.compile: {peer_diff:.2e})")
        else:
            failures.append(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": results, "failures": failures, "notes": notes, "steps": args.steps,
                       "repeat": args.repeat, "threads": args.threads, "torch": torch.__version__}, f, indent=1)
    for note in notes:
        print("note:", note)
    for failure in failures:
        print("MISMATCH:", failure, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
