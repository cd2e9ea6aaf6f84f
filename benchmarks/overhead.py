"""Per-call overhead and first-call capture time: dynacap vs torch's Dynamo.

What is measured (all in ONE process, both engines with ``backend="eager"``,
so the compiled graph runs the same ATen kernels as plain eager and every
difference is the engine's own cost):

* **eager µs/call**: steady-state time of one plain call of the function.
* **overhead µs** (per engine): steady-state time per call of the captured
  function minus the eager time, i.e. what the engine adds to every call
  once everything is compiled and cached: the wrapper, the frame hook, the
  guard check and the rewritten code (graph call, output rebuild, side
  effect replay, resume functions).  dynacap is
  ``dynacap.optimize(fn, backend="eager")``, Dynamo is
  ``torch.compile(fn, backend="eager")``.
* **capture ms** (per engine): time of the first call after a reset of that
  engine (``dynacap.reset()`` / ``torch._dynamo.reset()`` and a fresh
  wrapper), minus one steady-state eager call: tracing, guard building,
  backend, code generation.  Both engines get a throw-away warm-up compile
  first, so one-time imports/initialisation are not billed to the first case.
* **graphs/breaks** (per engine): ``dynacap.explain(fn)(*args)`` and
  ``torch._dynamo.explain(fn)(*args)``.

How it is timed (for a noisy, small box): ``torch`` runs single-threaded
(``--threads``), the garbage collector is off inside timed batches, every
variant is warmed up, then for each of ``--batches`` rounds eager, dynacap and
Dynamo each run ``--repeat`` (3) back-to-back batches of N calls and keep the
fastest (``time.perf_counter_ns`` around a batch; N calibrated so a batch
lasts about ``--batch-ms``, 1 ms by default), in an order that rotates every
round.  Batches are short, many (61 rounds) and best-of-3 because small shared
boxes stall a process for milliseconds at a time, and a stall only ever adds
time: short batches leave most readings clean, the best-of-3 cleans a round,
and the median over rounds drops the rounds that are still stalled.
eager is the median over rounds of the per-call time;
an engine's overhead is the median over rounds of (engine batch − eager batch
of the same round) / N, which cancels slow drift of the machine; "±" is half
the interquartile range of those per-round differences.  Capture time is the
median of ``--capture-reps`` resets, alternating engines.

Before anything is timed, every captured output (first call and a cached
call) is checked against eager (values, and the printed text for cases that
print); a mismatch aborts the case with a message and a non-zero exit status.

How to read the ratios: ``ratio = dynacap / Dynamo``.  Below 1 means dynacap
is cheaper (e.g. 0.25 = four times less overhead); above 1 means it costs
more.  "n/a" when Dynamo's figure is below the noise floor (≤ 0.05 µs).
Overheads near 0 are dominated by noise; look at the ± column.  A negative
overhead means the captured call is faster than eager: for models, an engine
that inlines submodules into one flat graph (``F.linear`` calls) no longer
pays ``nn.Module.__call__`` per layer.

Graph-break cases: a break makes dynacap (until resume functions land) run
the whole frame eagerly after a guard check, so its "graphs" is 0 and its
overhead is hook + guard + an eager frame; Dynamo splits the frame into
graphs and resume functions.  The two then do different work; the table
says what each does today.

Usage::

    PYTHONPATH=. python3 benchmarks/overhead.py                 # full run
    PYTHONPATH=. python3 benchmarks/overhead.py --quick         # smoke test
    PYTHONPATH=. python3 benchmarks/overhead.py --cases 'one_op,mlp*' --json out.json
    PYTHONPATH=. python3 benchmarks/overhead.py --list
"""
from __future__ import annotations

import argparse
import fnmatch
import gc
import io
import json
import logging
import math
import os
import platform
import statistics
import sys
import time
import warnings
import zlib
from dataclasses import dataclass, field

import torch
from torch import nn

import dynacap

# ---------------------------------------------------------------------------
# The cases.  Each ``make()`` returns a CaseInstance: the callable (function
# or nn.Module), its arguments and, for cases that print, the StringIO the
# function writes to (compared with eager, and emptied between batches).
# ---------------------------------------------------------------------------


@dataclass
class CaseInstance:
    fn: object
    args: tuple
    buf: io.StringIO | None = None


@dataclass
class Case:
    name: str
    kind: str  # "micro", "model", "break"
    description: str
    make: object


CASES: list[Case] = []


def case(name, kind, description):
    def register(make):
        CASES.append(Case(name, kind, description, make))
        return make
    return register


def _t(*shape, seed=0):
    g = torch.Generator().manual_seed(seed + sum(shape))
    return torch.randn(*shape, generator=g)


@case("one_op", "micro", "torch.sin(x), x: 8")
def _one_op():
    def one_op(x):
        return torch.sin(x)
    return CaseInstance(one_op, (_t(8),))


@case("pointwise", "micro", "5 pointwise ops on two 8-element tensors")
def _pointwise():
    def pointwise(x, y):
        return torch.sin(x) + torch.cos(y) * 2 - torch.tanh(x * y)
    return CaseInstance(pointwise, (_t(8), _t(8, seed=1)))


@case("matmul_bias_relu", "micro", "relu(x @ w + b), 8x64 @ 64x64")
def _matmul_bias_relu():
    def matmul_bias_relu(x, w, b):
        return torch.relu(x @ w + b)
    return CaseInstance(matmul_bias_relu, (_t(8, 64), _t(64, 64, seed=1), _t(64, seed=2)))


@case("args_const", "micro", "5 tensor args + a float and an int constant arg")
def _args_const():
    def args_const(a, b, c, d, e, scale, n):
        y = a * scale + b
        y = torch.clamp(y - c, min=-n, max=n)
        return y * d + e / n
    return CaseInstance(args_const, tuple(_t(16, seed=i) for i in range(5)) + (0.5, 3))


@case("method_heavy", "micro", "10 Tensor methods + .shape/.size()/.dim()")
def _method_heavy():
    def method_heavy(x):
        n = x.shape[0]
        y = x.view(n, -1).t().contiguous().mul(2).add(1)
        y = y.sum(dim=0).abs().sqrt().unsqueeze(0)
        return y.expand(x.size(1), -1).reshape(-1) * x.dim()
    return CaseInstance(method_heavy, (_t(4, 8),))


@case("inline_calls", "micro", "f calls 3 small Python helpers (inlined)")
def _inline_calls():
    def scale(x, s):
        return x * s

    def shift(x, s):
        return x + s

    def act(x):
        return torch.relu(x) - 0.5

    def inline_calls(x, y):
        return act(shift(scale(x, 2.0), y)) + act(y)
    return CaseInstance(inline_calls, (_t(8), _t(8, seed=1)))


class MLP20(nn.Module):
    """20 x (Linear + ReLU) in a ModuleList, looped over in a user forward."""

    def __init__(self, depth=20, width=64):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


@case("mlp20", "model", "user nn.Module: ModuleList of 20 x (Linear(64,64)+relu), batch 8")
def _mlp20():
    torch.manual_seed(0)
    return CaseInstance(MLP20(), (_t(8, 64),))


@case("mlp20_seq", "model", "nn.Sequential of 20 x (Linear(64,64)+ReLU), batch 8")
def _mlp20_seq():
    torch.manual_seed(0)
    layers = []
    for _ in range(20):
        layers += [nn.Linear(64, 64), nn.ReLU()]
    return CaseInstance(nn.Sequential(*layers), (_t(8, 64),))


@case("dyn_one_op", "micro", "one_op with dim 0 of x marked dynamic (a symbolic entry)")
def _dyn_one_op():
    x = _t(8)
    dynacap.mark_dynamic(x, 0)  # the same mark torch.compile reads (``_dynamo_dynamic_indices``)
    return CaseInstance(_one_op().fn, (x,))


@case("dyn_reshape", "micro", "x.view(x.size(0), -1) * x.size(1), x: 8x4 with both dims marked dynamic")
def _dyn_reshape():
    def dyn_reshape(x):
        return x.view(x.size(0), -1) * x.size(1)
    x = _t(8, 4)
    dynacap.mark_dynamic(x, [0, 1])
    return CaseInstance(dyn_reshape, (x,))


@case("static_reshape", "micro", "dyn_reshape without the marks (a static entry)")
def _static_reshape():
    return CaseInstance(_dyn_reshape().fn, (_t(8, 4),))


@case("break1", "break", "sin; print to StringIO; cos: 1 graph break")
def _break1():
    buf = io.StringIO()

    def break1(x):
        y = torch.sin(x) * 2
        print("mid", file=buf)
        return torch.cos(y) + 1
    return CaseInstance(break1, (_t(8),), buf)


@case("break3", "break", "4 pieces split by print, zlib.crc32 (unknown C fn), print: 3 breaks")
def _break3():
    buf = io.StringIO()

    def break3(x):
        y = torch.sin(x) * 2
        print("a", file=buf)
        y = torch.cos(y) + 1
        k = zlib.crc32(b"dynacap")
        y = y * (k % 7)
        print("b", file=buf)
        return torch.tanh(y) - x
    return CaseInstance(break3, (_t(8),), buf)


# ---------------------------------------------------------------------------
# Engines
# ---------------------------------------------------------------------------


def _dynamo():
    import torch._dynamo  # benchmarks may use Dynamo; the engine never does
    return torch._dynamo


ENGINES = ("dynacap", "dynamo")


def reset_engine(engine):
    if engine == "dynacap":
        dynacap.reset()
    else:
        _dynamo().reset()


def wrap(engine, fn):
    if engine == "dynacap":
        return dynacap.optimize(fn, backend="eager")
    return torch.compile(fn, backend="eager")


def explain_counts(engine, fn, args):
    if engine == "dynacap":
        e = dynacap.explain(fn)(*args)
        reasons = [r.reason for r in e.break_reasons]
    else:
        _dynamo().reset()
        e = _dynamo().explain(fn)(*args)
        reasons = [str(getattr(r, "reason", r)).splitlines()[0] for r in e.break_reasons]
    return e.graph_count, e.graph_break_count, reasons


# ---------------------------------------------------------------------------
# Correctness
# ---------------------------------------------------------------------------


class Mismatch(Exception):
    pass


def _compare(expected, actual, what):
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            raise Mismatch(f"{what}: expected a tensor, got {type(actual).__name__}")
        if expected.shape != actual.shape or expected.dtype != actual.dtype:
            raise Mismatch(f"{what}: shape/dtype {tuple(actual.shape)}/{actual.dtype}, "
                           f"eager {tuple(expected.shape)}/{expected.dtype}")
        if not torch.allclose(expected, actual, rtol=1e-5, atol=1e-6):
            raise Mismatch(f"{what}: values differ (max abs diff "
                           f"{(expected - actual).abs().max().item():.3g})")
    elif isinstance(expected, (tuple, list)):
        if type(expected) is not type(actual) or len(expected) != len(actual):
            raise Mismatch(f"{what}: structure differs")
        for i, (e, a) in enumerate(zip(expected, actual)):
            _compare(e, a, f"{what}[{i}]")
    elif expected != actual:
        raise Mismatch(f"{what}: {actual!r} != eager {expected!r}")


def _run_capturing_text(fn, args, buf):
    if buf is not None:
        buf.seek(0)
        buf.truncate()
    out = fn(*args)
    text = buf.getvalue() if buf is not None else None
    return out, text


def check_same_as_eager(inst: CaseInstance, eager_fn, captured, engine):
    expected, exp_text = _run_capturing_text(eager_fn, inst.args, inst.buf)
    for call in ("first call", "cached call"):
        out, text = _run_capturing_text(captured, inst.args, inst.buf)
        _compare(expected, out, f"{engine} {call} output")
        if text != exp_text:
            raise Mismatch(f"{engine} {call}: printed {text!r}, eager printed {exp_text!r}")


# ---------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------


def _time_batch(fn, args, n, buf):
    if buf is not None:
        buf.seek(0)
        buf.truncate()
    rng = range(n)
    t0 = time.perf_counter_ns()
    for _ in rng:
        fn(*args)
    return time.perf_counter_ns() - t0


def steady_state(variants: dict, args, buf, batches, batch_ms, warmup_calls, repeat):
    """Interleaved batches; returns {name: [ns per call for each round]} and N.

    In each round every variant runs ``repeat`` batches back to back and keeps
    the fastest: a stall of the machine only ever adds time, so the minimum of
    a few adjacent batches is a clean reading unless all of them stalled.
    """
    for fn in variants.values():
        for _ in range(warmup_calls):
            fn(*args)
    # calibrate N on the slowest variant
    slowest = 0.0
    for fn in variants.values():
        n = 4
        while _time_batch(fn, args, n, buf) < 1e6 and n < 1 << 20:
            n *= 2
        per_call_ns = min(_time_batch(fn, args, n, buf) for _ in range(5)) / n  # min: ignore stalls
        slowest = max(slowest, per_call_ns)
    n = max(3, int(batch_ms * 1e6 / slowest))
    names = list(variants)
    per_call = {name: [] for name in names}
    gc.collect()
    gc.disable()
    try:
        for r in range(batches):
            order = names[r % len(names):] + names[:r % len(names)]
            for name in order:
                best = min(_time_batch(variants[name], args, n, buf) for _ in range(repeat))
                per_call[name].append(best / n)
    finally:
        gc.enable()
    return per_call, n


def _iqr_half(xs):
    if len(xs) < 4:
        return (max(xs) - min(xs)) / 2 if xs else 0.0
    q = statistics.quantiles(xs, n=4)
    return (q[2] - q[0]) / 2


def capture_times(inst: CaseInstance, reps, eager_ns):
    """Median first-call time (ms) after a reset, minus one eager call, per engine."""
    times = {e: [] for e in ENGINES}
    for r in range(reps):
        order = ENGINES if r % 2 == 0 else ENGINES[::-1]
        for engine in order:
            reset_engine(engine)
            gc.collect()
            captured = wrap(engine, inst.fn)
            if inst.buf is not None:
                inst.buf.seek(0)
                inst.buf.truncate()
            t0 = time.perf_counter_ns()
            captured(*inst.args)
            dt = time.perf_counter_ns() - t0
            times[engine].append((dt - eager_ns) / 1e6)
    return {e: statistics.median(v) for e, v in times.items()}, times


# ---------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------


def warm_up_engines():
    """A throw-away compile per engine: lazy imports and one-time init are not billed to a case."""
    def warm(x, y):
        return torch.relu(x @ y + 1).sum(0)
    x = torch.randn(4, 4)
    for engine in ENGINES:
        reset_engine(engine)
        f = wrap(engine, warm)
        for _ in range(3):
            f(x, x)
        explain_counts(engine, warm, (x, x))
        reset_engine(engine)


def run_case(c: Case, opts):
    inst = c.make()
    eager_fn = inst.fn
    result = {"case": c.name, "kind": c.kind, "description": c.description}

    # graph/break counts (explain resets the engine, so it goes first)
    for engine in ENGINES:
        g, b, reasons = explain_counts(engine, inst.fn, inst.args)
        result[f"{engine}_graphs"], result[f"{engine}_breaks"] = g, b
        result[f"{engine}_break_reasons"] = reasons

    # correctness, on fresh caches
    captured = {}
    for engine in ENGINES:
        reset_engine(engine)
        captured[engine] = wrap(engine, inst.fn)
        check_same_as_eager(inst, eager_fn, captured[engine], engine)

    # steady state: eager, dynacap, Dynamo interleaved
    variants = {"eager": eager_fn, "dynacap": captured["dynacap"], "dynamo": captured["dynamo"]}
    per_call, n = steady_state(variants, inst.args, inst.buf, opts.batches, opts.batch_ms, opts.warmup,
                                 opts.repeat)
    eager = per_call["eager"]
    result["calls_per_batch"] = n
    result["eager_us"] = statistics.median(eager) / 1e3
    result["eager_batches_us"] = [t / 1e3 for t in eager]
    for engine in ENGINES:
        diffs = [a - e for a, e in zip(per_call[engine], eager)]
        result[f"{engine}_us"] = statistics.median(per_call[engine]) / 1e3
        result[f"{engine}_overhead_us"] = statistics.median(diffs) / 1e3
        result[f"{engine}_overhead_spread_us"] = _iqr_half(diffs) / 1e3
        result[f"{engine}_batches_us"] = [t / 1e3 for t in per_call[engine]]
    result["overhead_ratio"] = _ratio(result["dynacap_overhead_us"], result["dynamo_overhead_us"], 0.05)

    # cached calls must still give the eager answer after all that
    for engine in ENGINES:
        check_same_as_eager(inst, eager_fn, captured[engine], engine)

    # capture time (resets both engines)
    medians, all_times = capture_times(inst, opts.capture_reps, result["eager_us"] * 1e3)
    for engine in ENGINES:
        result[f"{engine}_capture_ms"] = medians[engine]
        result[f"{engine}_capture_reps_ms"] = all_times[engine]
    result["capture_ratio"] = _ratio(medians["dynacap"], medians["dynamo"], 1e-3)
    return result


def _ratio(a, b, floor):
    if b is None or a is None or b <= floor:
        return None
    return a / b


def _fmt_ratio(r):
    return "n/a" if r is None else f"{r:.2f}"


def format_table(results) -> str:
    headers = ["case", "eager µs", "dynacap ovh µs", "Dynamo ovh µs", "ratio",
               "dynacap cap ms", "Dynamo cap ms", "ratio", "dynacap g/b", "Dynamo g/b"]
    rows = []
    for r in results:
        rows.append([
            r["case"],
            f"{r['eager_us']:.2f}",
            f"{r['dynacap_overhead_us']:.2f} ±{r['dynacap_overhead_spread_us']:.2f}",
            f"{r['dynamo_overhead_us']:.2f} ±{r['dynamo_overhead_spread_us']:.2f}",
            _fmt_ratio(r["overhead_ratio"]),
            f"{r['dynacap_capture_ms']:.1f}",
            f"{r['dynamo_capture_ms']:.1f}",
            _fmt_ratio(r["capture_ratio"]),
            f"{r['dynacap_graphs']}/{r['dynacap_breaks']}",
            f"{r['dynamo_graphs']}/{r['dynamo_breaks']}",
        ])
    ovh = [r["overhead_ratio"] for r in results if r["overhead_ratio"] and r["overhead_ratio"] > 0]
    cap = [r["capture_ratio"] for r in results if r["capture_ratio"] and r["capture_ratio"] > 0]
    if len(results) > 1:
        rows.append(["geomean", "", "", "", _fmt_ratio(_geomean(ovh)), "", "", _fmt_ratio(_geomean(cap)), "", ""])
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]

    def line(cells):
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    out = [line(headers), line(["-" * w for w in widths])]
    out += [line(row) for row in rows]
    return "\n".join(out)


def _geomean(xs):
    if not xs:
        return None
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def engine_revision() -> str:
    """The checkout's commit, and whether the engine (dynacap/, csrc/) has uncommitted changes."""
    import subprocess
    root = os.path.dirname(os.path.dirname(os.path.abspath(dynacap.__file__)))
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "dynacap", "csrc"], cwd=root,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (head or "unknown") + ("+uncommitted engine changes" if dirty else "")


def select_cases(spec):
    if not spec:
        return list(CASES)
    patterns = [p.strip() for p in spec.split(",") if p.strip()]
    chosen = [c for c in CASES if any(fnmatch.fnmatchcase(c.name, p) for p in patterns)]
    unknown = [p for p in patterns if not any(fnmatch.fnmatchcase(c.name, p) for c in CASES)]
    if unknown:
        raise SystemExit(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(c.name for c in CASES)}")
    return chosen


def quiet_dynamo():
    warnings.simplefilter("ignore")
    for name in ("torch._dynamo", "torch._inductor", "torch.fx", "torch._subclasses"):
        logging.getLogger(name).setLevel(logging.ERROR)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="few, short batches and one capture rep (smoke test)")
    p.add_argument("--cases", default="", help="comma list of case names or glob patterns (default: all)")
    p.add_argument("--list", action="store_true", help="list the cases and exit")
    p.add_argument("--json", metavar="PATH", help="write all results (incl. per-batch times) as JSON")
    p.add_argument("--batches", type=int, help="timed rounds per case (default 61, quick 7)")
    p.add_argument("--batch-ms", type=float, help="target duration of one batch in ms (default 1)")
    p.add_argument("--repeat", type=int, default=3,
                   help="batches per variant per round, the fastest kept (default 3)")
    p.add_argument("--warmup", type=int, help="warm-up calls per variant (default 300, quick 20)")
    p.add_argument("--capture-reps", type=int, help="resets per engine for capture time (default 5, quick 1)")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    opts = p.parse_args(argv)
    if opts.list:
        for c in CASES:
            print(f"{c.name:18} {c.kind:6} {c.description}")
        return 0
    quick = opts.quick
    opts.batches = opts.batches or (7 if quick else 61)
    opts.batch_ms = opts.batch_ms or 1.0
    opts.warmup = opts.warmup if opts.warmup is not None else (20 if quick else 300)
    opts.capture_reps = opts.capture_reps or (1 if quick else 5)
    cases = select_cases(opts.cases)

    torch.set_num_threads(opts.threads)
    quiet_dynamo()
    revision = engine_revision()
    print(f"dynacap {dynacap.__version__} ({revision}) vs torch {torch.__version__} Dynamo, backend=eager; "
          f"Python {platform.python_version()}, {os.cpu_count()} CPUs, torch threads {opts.threads}; "
          f"{opts.batches} rounds x ~{opts.batch_ms:g} ms, capture median of {opts.capture_reps}"
          f"{' (QUICK: figures are rough)' if quick else ''}", flush=True)
    warm_up_engines()

    results, failures = [], []
    for c in cases:
        try:
            r = run_case(c, opts)
        except Mismatch as e:
            failures.append(f"{c.name}: WRONG RESULT: {e}")
            print(f"  {c.name}: WRONG RESULT: {e}", file=sys.stderr, flush=True)
            continue
        except Exception as e:  # keep going, report at the end
            failures.append(f"{c.name}: {type(e).__name__}: {e}")
            print(f"  {c.name}: FAILED: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            continue
        results.append(r)
        print(f"  {c.name}: done (N={r['calls_per_batch']})", file=sys.stderr, flush=True)

    print()
    print("overhead = captured − eager per call (steady state); cap = first call after reset − one eager call;")
    print("ratio = dynacap / Dynamo (< 1: dynacap cheaper); g/b = graphs/graph breaks from explain")
    print()
    if results:
        print(format_table(results))
    breaks = [r for r in results if r["dynacap_break_reasons"] or r["dynamo_break_reasons"]]
    if breaks:
        print()
        print("break reasons:")
        for r in breaks:
            for engine in ENGINES:
                for reason in r[f"{engine}_break_reasons"]:
                    print(f"  {r['case']} [{engine}]: {reason}")
    if failures:
        print()
        print("FAILURES:")
        for f in failures:
            print(f"  {f}")
    if opts.json:
        meta = {"dynacap_revision": revision, "torch": torch.__version__, "python": platform.python_version(), "cpus": os.cpu_count(),
                "threads": opts.threads, "batches": opts.batches, "batch_ms": opts.batch_ms,
                "capture_reps": opts.capture_reps, "repeat": opts.repeat, "quick": quick, "failures": failures}
        with open(opts.json, "w") as fh:
            json.dump({"meta": meta, "results": results}, fh, indent=1)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
