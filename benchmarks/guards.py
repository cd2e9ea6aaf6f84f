"""Guards and cache entries: cost per guard, what entries keep alive, instances, capture time.

Every figure is measured for dynacap and torch.compile (Dynamo) in the same process, both with
``backend="eager"`` (the graph runs the same kernels; every difference is the engine's):

* **per guard**: a function adding N module-level floats to a tensor (each float one guard)
  is called at N = 10, 100, 1000; ns per guard = (time per call at N − at 0) / N, the median
  over interleaved rounds (each time the best of 3 short batches). dynacap's default check is its C guard program; the row
  ``dynacap (Python)`` is the generated Python check (``DYNACAP_PYTHON_GUARDS=1``), for reference.
* **big list**: ``x + BIG[7]`` with a 30,000-item global list: guards made, first call, µs per call.
* **alive**: 60 models of distinct classes, each captured once, deleted without reset: how many
  the engine keeps alive; then after its reset.
* **instances**: 20 instances of one module class, each called through its own wrapper: graphs compiled.
* **capture**: first call after a reset, ms (no_grad, eval), for three tiny HuggingFace models (BERT,
  GPT-2, ViT built from configs in code, ``tests/transformers_models.py``) and, when timm is installed,
  timm's resnet50, vit_small_patch16_224 and convnext_tiny (1×3×224×224). Before each timed call
  torch's fake-tensor dispatch cache is emptied (neither engine's reset does; the engine measured
  second would find the model's operations cached); engines interleave, best of 3 (1 with ``--quick``).
  Wall time and the process's CPU time are both shown (each the best of the repeats): on a machine
  other jobs share, wall time also counts their turns, and CPU time is the steadier figure.

Usage::

    PYTHONPATH=. python3 benchmarks/guards.py             # ~2 minutes
    PYTHONPATH=. python3 benchmarks/guards.py --quick     # fewer repeats
    PYTHONPATH=. python3 benchmarks/guards.py --per-guard # only the per-guard figures
    PYTHONPATH=. python3 benchmarks/guards.py --capture   # only the capture times
"""
from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
import weakref

import torch

import dynacap

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

ENGINES = ("dynacap", "torch.compile")


def _dynamo():
    import torch._dynamo  # the peer; benchmarks may use it, the engine never does

    return torch._dynamo


def compile_with(engine, fn):
    if engine == "dynacap":
        return dynacap.optimize(fn, backend="eager")
    return torch.compile(fn, backend="eager")


def reset(engine):
    if engine == "dynacap":
        dynacap.reset()
    else:
        _dynamo().reset()


def best_per_call(fn, args, calls: int, repeats: int) -> float:
    """Seconds per call, best of ``repeats`` batches of ``calls``."""
    best = float("inf")
    for _ in range(repeats):
        gc.disable()
        start = time.perf_counter()
        for _ in range(calls):
            fn(*args)
        best = min(best, (time.perf_counter() - start) / calls)
        gc.enable()
    return best


def _summing(n: int):
    """``f(x) = x + (G0 + ... + G{n-1})`` over fresh module-level floats: n guarded constants."""
    namespace = {f"G{i}": float(i) + 0.5 for i in range(n)}
    body = " + ".join(f"G{i}" for i in range(n)) or "0.0"
    exec(f"def f(x):\n    return x + ({body})\n", namespace)
    return namespace["f"]


def per_guard(repeats: int) -> dict:
    """Engine -> {N: ns per guarded constant}; the engines' calls interleave, so load hits all alike."""
    x = torch.randn(4)
    rows = {"dynacap": ("dynacap", False), "dynacap (Python)": ("dynacap", True),
            "torch.compile": ("torch.compile", False)}
    fns = {}
    for row, (engine, python) in rows.items():
        reset(engine)
        if python:
            os.environ["DYNACAP_PYTHON_GUARDS"] = "1"  # read when a guard is compiled
        try:
            for n in (0, 10, 100, 1000):
                fns[row, n] = compile_with(engine, _summing(n))
                fns[row, n](x)
        finally:
            os.environ.pop("DYNACAP_PYTHON_GUARDS", None)
    # Per round: each function's best of 3 short batches; per-guard cost: the median over rounds of
    # (time at N - time at 0) / N, which cancels the machine's slow drift (a shared box).
    slopes: dict = {(row, n): [] for row in rows for n in (10, 100, 1000)}
    for _ in range(3 * repeats):
        times = {key: best_per_call(fn, (x,), 1000 if key[1] < 1000 else 200, 3) for key, fn in fns.items()}
        for row, n in slopes:
            slopes[row, n].append((times[row, n] - times[row, 0]) / n * 1e9)
    return {row: {n: statistics.median(slopes[row, n]) for n in (10, 100, 1000)} for row in rows}


BIG = list(range(30000))


def _big_list(x):
    return x + BIG[7]


def big_list(repeats: int) -> dict:
    x = torch.randn(3)
    out = {}
    for engine in ENGINES:
        reset(engine)
        fn = compile_with(engine, _big_list)
        start = time.perf_counter()
        fn(x)
        first = time.perf_counter() - start
        if engine == "dynacap":
            guards = len(dynacap.explain(_big_list)(x).guards)
            fn = compile_with(engine, _big_list)
            fn(x)
        else:
            guards = sum(len(g.split("\n")) for g in [str(_dynamo().explain(_big_list)(x).out_guards or "")])
            reset(engine)
            fn = compile_with(engine, _big_list)
            fn(x)
        out[engine] = {"guards": guards, "first_ms": first * 1e3,
                       "us_per_call": best_per_call(fn, (x,), 500, repeats) * 1e6}
    return out


SOURCE = "def forward(self, x):\n    return self.fc(x).relu() * 2\n"


def _model_of_its_own_class(i: int):
    namespace: dict = {}
    exec(compile(SOURCE, f"<model {i}>", "exec"), namespace)
    cls = type(f"Model{i}", (torch.nn.Module,), {"forward": namespace["forward"]})
    model = cls()
    model.fc = torch.nn.Linear(64, 64)
    return model


def alive() -> dict:
    out = {}
    for engine in ENGINES:
        reset(engine)
        refs = []
        for i in range(60):
            model = _model_of_its_own_class(i)
            compile_with(engine, model)(torch.randn(2, 64))
            refs.append(weakref.ref(model))
            del model
        gc.collect()
        kept = sum(r() is not None for r in refs)
        reset(engine)
        gc.collect()
        out[engine] = {"alive": kept, "alive_after_reset": sum(r() is not None for r in refs)}
    return out


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(16, 16)

    def forward(self, x):
        return self.fc(x).relu() + 1


class CountingEager:
    def __init__(self):
        self.compiles = 0

    def __call__(self, gm, example_inputs):
        self.compiles += 1
        return gm.forward


def instances() -> dict:
    out = {}
    x = torch.randn(2, 16)
    for engine in ENGINES:
        reset(engine)
        backend = CountingEager()
        for _ in range(20):
            model = Block()
            wrapped = dynacap.optimize(model, backend=backend) if engine == "dynacap" else \
                torch.compile(model, backend=backend)
            assert torch.allclose(model(x), wrapped(x))
        out[engine] = backend.compiles
    return out


#: timm models of the capture figures (``timm`` imports torchvision and PIL: stubs stand in for them).
TIMM_MODELS = ("resnet50", "vit_small_patch16_224", "convnext_tiny")


def _timm():
    """timm, or None when it is not installed."""
    from dynacap.harness import stubs

    stubs.finder().add("torchvision")
    stubs.finder().add("PIL")
    try:
        import timm
    except ImportError:
        return None
    return timm


def _first_call_ms(engine, model, kwargs) -> float:
    """One first call after a reset, as a fresh process would make it: torch's fake-tensor dispatch
    cache (a class attribute neither reset clears) is emptied, or the engine measured second would
    find the model's operations already propagated by the first."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    reset(engine)
    FakeTensorMode.cache_clear()
    wrapped = compile_with(engine, model)
    gc.collect()
    start, cpu = time.perf_counter(), time.process_time()
    wrapped(**kwargs)
    return (time.perf_counter() - start) * 1e3, (time.process_time() - cpu) * 1e3


def capture_times(repeats: int = 1) -> dict:
    """ms of the first call after a reset per model and engine (best of ``repeats``, engines interleaved);
    a model that cannot be built maps to the reason."""
    from transformers_models import build

    models = [(name, lambda name=name: build(name)) for name in ("bert", "gpt2", "vit")]
    timm = _timm()
    if timm is None:
        models += [(name, "skipped: timm is not installed") for name in TIMM_MODELS]
    else:
        models += [(name, lambda name=name: (timm.create_model(name), {"x": torch.randn(1, 3, 224, 224)}))
                   for name in TIMM_MODELS]
    out = {}
    for name, make in models:
        if isinstance(make, str):
            out[name] = make
            continue
        model, kwargs = make()
        model.eval()
        row = {key: float("inf") for engine in ENGINES for key in (engine, f"{engine} cpu")}
        with torch.no_grad():
            model(**kwargs)
            for _ in range(repeats):
                for engine in ENGINES:
                    wall, cpu = _first_call_ms(engine, model, kwargs)
                    row[engine] = min(row[engine], wall)
                    row[f"{engine} cpu"] = min(row[f"{engine} cpu"], cpu)
        out[name] = row
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repeats (rough figures)")
    parser.add_argument("--per-guard", action="store_true", help="only the per-guard figures")
    parser.add_argument("--capture", action="store_true", help="only the capture times")
    args = parser.parse_args(argv)
    repeats = 3 if args.quick else 7
    torch.set_num_threads(1)
    import warnings

    warnings.simplefilter("ignore")  # cache-limit warnings of transformers' helpers (both engines)
    _dynamo()
    # One-time initialisation of each engine (dynacap's symbolic-shape machinery too, which Dynamo's
    # first compile always loads).
    compile_with("dynacap", lambda x: x + 1)(torch.randn(2))
    dynacap.optimize(lambda x: x * 2, backend="eager", dynamic=True)(torch.randn(3))
    compile_with("torch.compile", lambda x: x + 1)(torch.randn(2))

    if args.capture:
        print_capture_times(repeats)
        return 0
    print("ns per guarded constant (per-call time at N guards minus at 0, / N)")
    for engine, row in per_guard(repeats).items():
        print(f"  {engine:<17} " + "  ".join(f"N={n}: {v:7.1f}" for n, v in row.items())
              + f"   (1,000 guards: {row[1000]:.1f} µs)")
    if args.per_guard:
        return 0
    print("x + BIG[7], a 30,000-item global list")
    for engine, row in big_list(repeats).items():
        print(f"  {engine:<14} guards {row['guards']:>6}  first call {row['first_ms']:8.1f} ms  "
              f"{row['us_per_call']:7.1f} µs/call")
    print("60 models of distinct classes, deleted without reset")
    for engine, row in alive().items():
        print(f"  {engine:<14} alive {row['alive']:>3}  after reset {row['alive_after_reset']:>3}")
    print("20 instances of one class: graphs compiled")
    for engine, n in instances().items():
        print(f"  {engine:<14} {n}")
    print_capture_times(repeats)
    return 0


def print_capture_times(repeats: int) -> None:
    reps = 1 if repeats < 7 else 3
    print(f"capture time, first call after reset (ms, best of {reps}); ratio = dynacap / torch.compile; "
          "cpu: the process's CPU time (on a shared machine, wall time also counts other processes' turns)")
    for name, row in capture_times(reps).items():
        if isinstance(row, str):
            print(f"  {name:<22} {row}")
            continue
        print(f"  {name:<22} dynacap {row['dynacap']:8.1f}  torch.compile {row['torch.compile']:8.1f}  "
              f"ratio {row['dynacap'] / row['torch.compile']:.2f}   cpu: dynacap {row['dynacap cpu']:8.1f}  "
              f"torch.compile {row['torch.compile cpu']:8.1f}  ratio {row['dynacap cpu'] / row['torch.compile cpu']:.2f}")


if __name__ == "__main__":
    raise SystemExit(main())
