"""Manifest generator: ``torch.nn`` modules with the sample inputs of torch's module database.

Real third-party model code for the harness: every entry of
``torch.testing._internal.common_modules.module_db`` (torch's own test
database of ``torch.nn`` modules) with up to N of its sample constructor and
forward inputs (CPU, float32, eval mode).  Inputs are saved with
``torch.save`` next to the manifest and referenced by its ``data`` field;
the *project* of a case is the module's Python module
(``torch.nn.modules.conv`` ...).  Needs the ``expecttest`` package, which
torch's testing utilities import.  It only writes a manifest; it must not run
the corpus.

    python -m dynacap.harness.moduledb --out /tmp/moduledb --per-module 2
    python -m dynacap corpus /tmp/moduledb/manifest.jsonl --compiler both --out out/moduledb
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys


def _plain(obj):
    """Detach tensors (the database makes some with requires_grad)."""
    import torch
    if isinstance(obj, torch.Tensor):
        return obj.detach().clone()
    if isinstance(obj, list):
        return [_plain(o) for o in obj]
    if isinstance(obj, tuple):
        return type(obj)(_plain(o) for o in obj) if not hasattr(obj, "_fields") else type(obj)(*[_plain(o) for o in obj])
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    return obj


def generate(out_dir: str, per_module: int = 2, names: list[str] | None = None) -> dict:
    import torch
    from torch.testing._internal.common_modules import module_db
    os.makedirs(os.path.join(out_dir, "data"), exist_ok=True)
    lines, skipped = [], []
    for info in module_db:
        if names and info.name not in names:
            continue
        cls = info.module_cls
        try:
            samples = list(info.module_inputs_func(info, device="cpu", dtype=torch.float32,
                                                   requires_grad=False, training=False))
        except Exception as e:  # noqa: BLE001 - some entries need CUDA or other dtypes
            skipped.append({"module": info.name, "why": f"{type(e).__name__}: {e}"[:200]})
            continue
        n = 0
        for i, mi in enumerate(samples):
            if n >= per_module:
                break
            if mi.forward_input is None:
                continue
            ci, fi = mi.constructor_input, mi.forward_input
            data = {"init_args": _plain(list(ci.args)), "init_kwargs": _plain(dict(ci.kwargs)),
                    "args": _plain(list(fi.args)), "kwargs": _plain(dict(fi.kwargs))}
            slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{info.name}_{i}")
            rel = os.path.join("data", slug + ".pt")
            torch.save(data, os.path.join(out_dir, rel))
            lines.append({"id": f"{cls.__module__}/{cls.__qualname__}#{i}", "project": cls.__module__,
                          "module": cls.__module__, "class": cls.__qualname__, "data": rel,
                          "desc": (mi.desc or "")[:120]})
            n += 1
    path = os.path.join(out_dir, "manifest.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for d in lines:
            f.write(json.dumps(d) + "\n")
    return {"manifest": path, "cases": len(lines), "modules": len({d["class"] for d in lines}),
            "skipped": skipped, "torch": torch.__version__}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m dynacap.harness.moduledb", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="folder for manifest.jsonl and data/")
    p.add_argument("--per-module", type=int, default=2, help="sample inputs per module (default 2)")
    p.add_argument("--only", nargs="*", help="module names such as nn.Linear")
    a = p.parse_args(argv)
    info = generate(a.out, a.per_module, a.only)
    print(json.dumps({k: v for k, v in info.items() if k != "skipped"}, indent=1))
    for s in info["skipped"]:
        print(f"skipped {s['module']}: {s['why']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
