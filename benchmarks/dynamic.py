"""Dynamic-shape sweeps: compiles per sweep, dynacap vs torch.compile, in the same process.

Each case is called once per size of a sweep (11 batch sizes, or 6 sequence
lengths for the Transformer layer) under each engine and option; every result
is checked against eager (a mismatch aborts with a non-zero status), and the
number of backend compiles is counted with a counting backend that wraps the
real one (``eager`` by default, ``--backend aot_eager`` or ``inductor``).

Columns: ``dynacap`` / ``torch.compile`` for ``dynamic=None`` (automatic
dynamic, the default), then ``dynamic=True`` and ``dynamic=False``, then
``mark_dynamic`` (dim marked on every input before the call; no
``dynamic=`` option).  A graph break would count as more compiles, so the
numbers also show that a sweep stays in one graph.

Usage::

    PYTHONPATH=. python3 benchmarks/dynamic.py
    PYTHONPATH=. python3 benchmarks/dynamic.py --backend aot_eager --cases attention,encoder
"""
from __future__ import annotations

import argparse
import sys

import torch

import dynacap

SIZES = [3, 4, 5, 6, 7, 9, 12, 16, 21, 33, 64]
SEQ_LENGTHS = [3, 5, 8, 11, 17, 30]


class Counting:
    """A backend for either engine that counts compiles and compiles with ``inner``."""

    def __init__(self, inner: str):
        self.inner = inner
        self.compiles = 0

    def __call__(self, gm, example_inputs):
        self.compiles += 1
        if self.inner == "eager":
            return gm.forward
        if self.inner == "aot_eager":
            from functorch.compile import make_boxed_func
            from torch._functorch.aot_autograd import aot_module_simplified

            return aot_module_simplified(gm, example_inputs, fw_compiler=lambda g, _: make_boxed_func(g.forward))
        from torch._inductor.compile_fx import compile_fx

        return compile_fx(gm, example_inputs)


def _encoder():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True).eval()
    return layer


CASES = {
    # name: (make callable, make args for a size, sizes, dim to mark on each tensor argument)
    "elementwise": (lambda: (lambda x: torch.relu(x) * 2 + 1), lambda n: (torch.randn(n, 8),), SIZES, 0),
    "matmul": (lambda: (lambda a, b: a @ b), lambda n: (torch.randn(n, 8), torch.randn(8, 5)), SIZES, 0),
    "reshape_transpose": (lambda: (lambda x: x.reshape(x.shape[0], 2, -1).transpose(1, 2).contiguous()),
                          lambda n: (torch.randn(n, 12),), SIZES, 0),
    "cat_size_arith": (lambda: (lambda x, y: torch.cat([x, y]).view(x.size(0) + y.size(0), -1).sum(1)),
                       lambda n: (torch.randn(n, 4), torch.randn(n + 1, 4)), SIZES, 0),
    "attention": (lambda: (lambda q, k, v: torch.softmax(q @ k.transpose(-2, -1) / 8 ** 0.5, -1) @ v),
                  lambda n: tuple(torch.randn(2, n, 8) for _ in range(3)), SIZES, 1),
    "encoder": (_encoder, lambda n: (torch.randn(2, n, 16),), SEQ_LENGTHS, 1),
}


def _compile(engine: str, fn, backend, dynamic):
    if engine == "dynacap":
        return dynacap.optimize(fn, backend=backend, dynamic=dynamic)
    return torch.compile(fn, backend=backend, dynamic=dynamic)


def _reset(engine: str) -> None:
    if engine == "dynacap":
        dynacap.reset()
    else:
        import torch._dynamo

        torch._dynamo.reset()


def sweep(engine: str, name: str, option: str, inner: str) -> int:
    make_fn, make_args, sizes, dim = CASES[name]
    fn = make_fn()
    _reset(engine)
    backend = Counting(inner)
    dynamic = {"auto": None, "true": True, "false": False, "mark": None}[option]
    compiled = _compile(engine, fn, backend, dynamic)
    with torch.no_grad():
        for n in sizes:
            torch.manual_seed(n)
            args = make_args(n)
            if option == "mark":
                for a in args:
                    if a.size(dim) == n:
                        (dynacap.mark_dynamic if engine == "dynacap" else torch._dynamo.mark_dynamic)(a, dim)
            expected = fn(*args)
            got = compiled(*args)
            if not torch.allclose(expected, got, rtol=1e-4, atol=1e-5):
                sys.exit(f"{engine} {name} {option}: wrong result at size {n}")
    return backend.compiles


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="eager", choices=["eager", "aot_eager", "inductor"])
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated case names")
    args = parser.parse_args(argv)
    import torch._dynamo  # noqa: F401  (the peer; imported here, never by the engine)

    options = ["auto", "true", "false", "mark"]
    header = ["case", "sizes"] + [f"{o}: dynacap/torch.compile" for o in options]
    rows = []
    for name in args.cases.split(","):
        row = [name, str(len(CASES[name][2]))]
        for option in options:
            ours = sweep("dynacap", name, option, args.backend)
            theirs = sweep("torch.compile", name, option, args.backend)
            row.append(f"{ours} / {theirs}")
        rows.append(row)
        print(" | ".join(row), flush=True)
    print()
    print(f"compiles per sweep (backend {args.backend}); auto = dynamic=None (automatic dynamic)")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
