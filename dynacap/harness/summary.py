"""Aggregation of case records into the numbers the reports show.

Runs in the harness process on the records of ``results.jsonl``.  Computes,
per compiler, status counts, the paritybench-style headline (cases passing,
projects all passing, captured as one graph), graph-break reasons with example
locations, distributions (graphs per case, first-call time, overhead) and
per-project tables, the dynacap-vs-Dynamo comparison, the cases that ask
``is_compiling()`` and which sandbox protections the cases had.  Pure data in,
data out: it must not read or write files, nor render anything.
"""
from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict

from .case import OK, STATUSES, as_float
from .sandbox import protections

GRAPH_BUCKETS = ("0", "1", "2", "3", "4-5", "6-10", ">10")
TIME_EDGES = (0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0)      # seconds
OVERHEAD_EDGES = (0.5, 0.9, 1.1, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0)          # captured / eager


def graph_bucket(n: int) -> str:
    if n <= 3:
        return str(n)
    if n <= 5:
        return "4-5"
    if n <= 10:
        return "6-10"
    return ">10"


def edge_buckets(values: list[float], edges: tuple, unit: str = "") -> list[tuple[str, int]]:
    labels = [f"<{edges[0]:g}{unit}"] + [f"{a:g}-{b:g}{unit}" for a, b in zip(edges, edges[1:])] + \
        [f">{edges[-1]:g}{unit}"]
    counts = [0] * len(labels)
    for v in values:
        i = 0
        while i < len(edges) and v >= edges[i]:
            i += 1
        counts[i] += 1
    return list(zip(labels, counts))


def _pct(a: int, b: int) -> float | None:
    return (100.0 * a / b) if b else None


def _one_graph(r: dict) -> bool:
    return r.get("status") == OK and r.get("graph_count") == 1 and not r.get("graph_break_count")


def compilers_of(records: list[dict]) -> list[str]:
    seen: list[str] = []
    for rec in records:
        for c in (rec.get("results") or {}):
            if c not in seen:
                seen.append(c)
    order = {"dynacap": 0, "dynamo": 1}
    return sorted(seen, key=lambda c: (order.get(c, 9), c))


def summarize_compiler(records: list[dict], comp: str) -> dict:
    status = Counter()
    runnable = ok = one = ok_no_graph = 0
    projects: dict[str, list[str]] = defaultdict(list)
    reasons: dict[str, dict] = {}
    graphs = Counter()
    first_calls, overheads, max_errors = [], [], []
    for rec in records:
        r = (rec.get("results") or {}).get(comp)
        if r is None:
            continue
        st = r.get("status") or "crash"
        status[st] += 1
        projects[rec.get("project", "?")].append(st)
        if (rec.get("prepare") or {}).get("status") == OK:
            runnable += 1
        ok += st == OK
        one += _one_graph(r)
        ok_no_graph += st == OK and r.get("graph_count") == 0
        if r.get("graph_count") is not None and st in (OK, "wrong_result"):
            graphs[graph_bucket(int(r["graph_count"]))] += 1
        fc = as_float(r.get("first_call_s"))
        if fc is not None and st in (OK, "wrong_result"):
            first_calls.append(fc)
        ov = as_float(r.get("overhead"))
        if ov is not None and st in (OK, "wrong_result"):
            overheads.append(ov)
        me = as_float(r.get("max_error"))
        if me is not None and st in (OK, "wrong_result"):
            max_errors.append(me)
        for br in r.get("break_reasons") or []:
            key = br.get("reason") or "?"
            d = reasons.setdefault(key, {"reason": key, "count": 0, "cases": set(), "locations": [],
                                         "detail": br.get("detail")})
            d["count"] += 1
            d["cases"].add(rec["id"])
            loc = br.get("location")
            if loc and loc not in d["locations"] and len(d["locations"]) < 3:
                d["locations"].append(loc)
    total = sum(status.values())
    proj_rows = []
    all_pass = all_pass_runnable = runnable_projects = 0
    for p in sorted(projects):
        sts = projects[p]
        c = Counter(sts)
        good = all(s == OK for s in sts)
        runnable_sts = [s for s in sts if s not in ("eager_error", "import_error", "nondeterministic")]
        all_pass += good
        if runnable_sts:
            runnable_projects += 1
            all_pass_runnable += all(s == OK for s in runnable_sts)
        proj_rows.append({"project": p, "cases": len(sts), "ok": c[OK], "statuses": dict(c),
                          "all_pass": good})
    top = sorted(reasons.values(), key=lambda d: (-d["count"], d["reason"]))[:20]
    for d in top:
        d["cases"] = len(d["cases"])
    return {
        "compiler": comp, "cases": total, "runnable": runnable,
        "status": {s: status.get(s, 0) for s in STATUSES},
        "ok": ok, "one_graph": one, "ok_no_graph": ok_no_graph,
        "pct_pass": _pct(ok, total), "pct_pass_runnable": _pct(ok, runnable),
        "pct_one_graph": _pct(one, total), "pct_one_graph_runnable": _pct(one, runnable),
        "projects": len(projects), "projects_all_pass": all_pass,
        "pct_projects_all_pass": _pct(all_pass, len(projects)),
        "runnable_projects": runnable_projects, "runnable_projects_all_pass": all_pass_runnable,
        "pct_runnable_projects_all_pass": _pct(all_pass_runnable, runnable_projects),
        "break_count_total": sum(d["count"] for d in reasons.values()),
        "break_reasons": top,
        "graphs_hist": [(b, graphs.get(b, 0)) for b in GRAPH_BUCKETS],
        "first_call_hist": edge_buckets(first_calls, TIME_EDGES, "s"),
        "overhead_hist": edge_buckets(overheads, OVERHEAD_EDGES, "x"),
        "first_call_median_s": statistics.median(first_calls) if first_calls else None,
        "overhead_median": statistics.median(overheads) if overheads else None,
        "overhead_geomean": math.exp(statistics.fmean(math.log(max(v, 1e-9)) for v in overheads))
        if overheads else None,
        "max_error_max": max(max_errors) if max_errors else None,
        "project_rows": proj_rows,
    }


def sandbox_summary(records: list[dict]) -> dict:
    """For each protection, in how many of the cases with a sandbox report it was active."""
    reports = [r["sandbox"] for r in records if isinstance(r.get("sandbox"), dict)]
    counts: dict[str, int] = {}
    for sb in reports:
        for name, on in protections(sb).items():
            counts[name] = counts.get(name, 0) + bool(on)
    return {"cases": len(reports), "active": counts}


def summarize(records: list[dict]) -> dict:
    comps = compilers_of(records)
    out = {"cases": len(records), "projects": len({r.get("project") for r in records}),
           "compilers": comps, "per_compiler": {c: summarize_compiler(records, c) for c in comps},
           "case_level": Counter((r.get("prepare") or {}).get("status", "crash") for r in records)}
    out["case_level"] = dict(out["case_level"])
    out["checks_compiling"] = [{"id": r["id"], "statuses": {c: (r["results"].get(c) or {}).get("status")
                                                           for c in comps}}
                               for r in sorted(records, key=lambda r: r["id"]) if r.get("checks_compiling")]
    out["sandbox"] = sandbox_summary(records)
    if len(comps) >= 2:
        a, b = comps[0], comps[1]
        cross = Counter()
        rows = []
        for rec in sorted(records, key=lambda r: r["id"]):
            ra, rb = rec["results"].get(a) or {}, rec["results"].get(b) or {}
            cross[(ra.get("status"), rb.get("status"))] += 1
            rows.append({"id": rec["id"], "project": rec.get("project"), a: ra, b: rb,
                         "differs": ra.get("status") != rb.get("status") or
                         ra.get("graph_count") != rb.get("graph_count")})
        out["comparison"] = {"a": a, "b": b,
                             "crosstab": [{"a": k[0], "b": k[1], "count": v} for k, v in sorted(
                                 cross.items(), key=lambda kv: -kv[1])],
                             "rows": rows,
                             "same_status": sum(1 for r in rows if r[a].get("status") == r[b].get("status"))}
    return out
