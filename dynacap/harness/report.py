"""Rendering ``report.md`` and the self-contained ``report.html`` of a run.

Runs in the harness process after (or during) a run.  Takes the records and
the summary (:mod:`dynacap.harness.summary`) and writes Markdown and HTML with
inline SVG charts (:mod:`dynacap.harness.charts`): headline numbers, statuses,
graph-break reasons with example locations, graphs-per-case, first-call time
and overhead distributions, a per-project table, the side-by-side comparison,
the failures, the cases that ask ``is_compiling()`` and the sandbox's
protections.  The HTML loads nothing from the network.  It must not run
cases.
"""
from __future__ import annotations

import datetime
import os
from html import escape

from . import charts
from .case import STATUSES, as_float
from .summary import summarize


def _p(v) -> str:
    return "n/a" if v is None else f"{v:.1f}%"


def _s(v) -> str:
    v = as_float(v)
    if v is None:
        return ""
    if v < 1e-3:
        return f"{v * 1e6:.0f}µs"
    if v < 1:
        return f"{v * 1e3:.1f}ms"
    return f"{v:.2f}s"


def _short_loc(loc: str | None) -> str:
    if not loc:
        return ""
    cwd = os.getcwd() + os.sep
    return loc[len(cwd):] if loc.startswith(cwd) else loc


def _first_line(s: str | None, n: int = 160) -> str:
    if not s:
        return ""
    line = s.strip().splitlines()[0] if s.strip() else ""
    return line if len(line) <= n else line[: n - 3] + "..."


def _cell(r: dict) -> tuple[str, str, str, str]:
    return (r.get("status") or "", "" if r.get("graph_count") is None else str(r["graph_count"]),
            "" if r.get("graph_break_count") is None else str(r["graph_break_count"]), _s(r.get("first_call_s")))


def headline_lines(summary: dict) -> list[str]:
    out = []
    for c in summary["compilers"]:
        s = summary["per_compiler"][c]
        out.append(f"{c}: {_p(s['pct_pass'])} of cases pass ({s['ok']}/{s['cases']}; "
                   f"{_p(s['pct_pass_runnable'])} of {s['runnable']} eager-runnable), "
                   f"{_p(s['pct_projects_all_pass'])} of projects all-passing "
                   f"({s['projects_all_pass']}/{s['projects']}), "
                   f"{_p(s['pct_one_graph'])} captured as one graph ({s['one_graph']}/{s['cases']}; "
                   f"{_p(s['pct_one_graph_runnable'])} of runnable)"
                   + (f"; {s['ok_no_graph']} passing cases captured no graph (ran eagerly)"
                      if s.get("ok_no_graph") else ""))
    return out


# ------------------------------------------------------------------ markdown
def render_md(records: list[dict], summary: dict, meta: dict) -> str:
    L = ["# dynacap corpus report", ""]
    L.append(f"Generated {datetime.datetime.now().isoformat(timespec='seconds')}; "
             f"{summary['cases']} cases in {summary['projects']} projects; compilers: "
             f"{', '.join(summary['compilers'])}; backend `{meta.get('backend')}`, "
             f"fullgraph={meta.get('fullgraph')}.")
    if meta.get("command"):
        L += ["", f"Command: `{meta['command']}`"]
    L += ["", "## Headline", ""]
    L += [f"- {x}" for x in headline_lines(summary)]
    L += ["", "Passing = status `ok` (captured run matches eager within tolerance). "
          "Eager-runnable = the case imports, instantiates and runs eagerly twice with identical outputs.", ""]
    L += [f"> {x}" for x in compiling_note(summary)] + ([""] if summary.get("checks_compiling") else [])
    comps = summary["compilers"]
    L += ["## Statuses", "", "| status | " + " | ".join(comps) + " |", "|---|" + "---:|" * len(comps)]
    for st in STATUSES:
        L.append(f"| {st} | " + " | ".join(str(summary["per_compiler"][c]["status"][st]) for c in comps) + " |")
    L.append("")
    for c in comps:
        s = summary["per_compiler"][c]
        L += [f"## Graph breaks ({c}): {s['break_count_total']} in total, top reasons", ""]
        if not s["break_reasons"]:
            L += ["None.", ""]
            continue
        L += ["| # | reason | breaks | cases | example locations |", "|---:|---|---:|---:|---|"]
        for i, d in enumerate(s["break_reasons"], 1):
            reason = d["reason"].replace("|", "\\|")
            locs = ", ".join(f"`{_short_loc(x)}`" for x in d["locations"])
            L.append(f"| {i} | {reason} | {d['count']} | {d['cases']} | {locs} |")
        L.append("")
    L += ["## Graphs per case (ok or wrong_result)", "", "| graphs | " + " | ".join(comps) + " |",
          "|---|" + "---:|" * len(comps)]
    for i, (b, _) in enumerate(summary["per_compiler"][comps[0]]["graphs_hist"] if comps else []):
        L.append(f"| {b} | " + " | ".join(str(summary["per_compiler"][c]["graphs_hist"][i][1]) for c in comps) + " |")
    L += ["", "## Timing", "", "| compiler | median first call (compile + run) | median overhead "
          "(captured / eager steady state) | geomean overhead |", "|---|---:|---:|---:|"]
    for c in comps:
        s = summary["per_compiler"][c]
        ov = s["overhead_median"]
        gm = s["overhead_geomean"]
        L.append(f"| {c} | {_s(s['first_call_median_s'])} | {'' if ov is None else f'{ov:.2f}x'} | "
                 f"{'' if gm is None else f'{gm:.2f}x'} |")
    L += ["", "## Projects", "", "| project | cases | " + " | ".join(f"{c} ok" for c in comps) + " | all pass |",
          "|---|---:|" + "---:|" * len(comps) + "---|"]
    rows = {c: {r["project"]: r for r in summary["per_compiler"][c]["project_rows"]} for c in comps}
    for p in sorted(rows[comps[0]]) if comps else []:
        L.append(f"| {p} | {rows[comps[0]][p]['cases']} | " +
                 " | ".join(str(rows[c].get(p, {}).get("ok", "")) for c in comps) + " | " +
                 ", ".join(c for c in comps if rows[c].get(p, {}).get("all_pass")) + " |")
    comp = summary.get("comparison")
    if comp:
        a, b = comp["a"], comp["b"]
        L += ["", f"## Side by side: {a} vs {b}", "",
              f"Same status on {comp['same_status']} of {len(comp['rows'])} cases.", "",
              f"| {a} status | {b} status | cases |", "|---|---|---:|"]
        for x in comp["crosstab"]:
            L.append(f"| {x['a']} | {x['b']} | {x['count']} |")
        L += ["", f"| case | {a} | graphs | breaks | first call | {b} | graphs | breaks | first call |",
              "|---|---|---:|---:|---:|---|---:|---:|---:|"]
        for r in comp["rows"]:
            L.append(f"| `{r['id']}` | " + " | ".join(_cell(r[a])) + " | " + " | ".join(_cell(r[b])) + " |")
    else:
        c = comps[0] if comps else None
        if c:
            L += ["", f"## Cases ({c})", "", "| case | status | graphs | breaks | first call |",
                  "|---|---|---:|---:|---:|"]
            for rec in sorted(records, key=lambda r: r["id"]):
                L.append(f"| `{rec['id']}` | " + " | ".join(_cell(rec["results"].get(c) or {})) + " |")
    fails = [(rec, c, rec["results"][c]) for rec in sorted(records, key=lambda r: r["id"]) for c in comps
             if c in rec["results"] and rec["results"][c].get("status") != "ok"]
    if fails:
        L += ["", "## Not passing", "", "| case | compiler | status | error |", "|---|---|---|---|"]
        for rec, c, r in fails:
            err = r.get("error") or (rec.get("prepare") or {}).get("error")
            L.append(f"| `{rec['id']}` | {c} | {r.get('status')} | {_first_line(err).replace('|', '/')} |")
    sb = summary.get("sandbox") or {}
    if sb.get("cases"):
        L += ["", "## Sandbox", "", f"Protections of the case workers (docs/corpus.md, threat model), "
              f"over the {sb['cases']} cases that reported one:", "", "| protection | cases with it |", "|---|---:|"]
        L += [f"| {name} | {n}/{sb['cases']}{'' if n == sb['cases'] else ' **missing**'} |"
              for name, n in sb["active"].items()]
    L.append("")
    return "\n".join(L)


def compiling_note(summary: dict) -> list[str]:
    """Why pass rates may differ between compilers: cases that ask ``is_compiling()``."""
    rows = summary.get("checks_compiling") or []
    if not rows:
        return []
    comps = summary["compilers"]
    differ = [r for r in rows if len({r["statuses"].get(c) for c in comps}) > 1]
    ids = ", ".join(r["id"] for r in rows[:10]) + (", ..." if len(rows) > 10 else "")
    return [f"{len(rows)} case(s) ask torch.compiler.is_compiling() (or a sibling) in their file and run "
            f"other code under a compiler that answers True (Dynamo does), so their results may differ "
            f"between compilers for that reason alone" + (f"; {len(differ)} of them have different statuses "
                                                           "here" if len(comps) > 1 else "") + f": {ids}."]


# ------------------------------------------------------------------ html
_CSS = """
body{font-family:system-ui,sans-serif;margin:24px;max-width:1200px;color:#222}
h1{font-size:22px} h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:12px;margin:8px 0} td,th{border:1px solid #ddd;padding:3px 6px;
text-align:left;vertical-align:top} th{background:#f4f4f4} td.n{text-align:right}
.ok{color:#2ca02c;font-weight:600} .bad{color:#d62728;font-weight:600} .other{color:#8c564b}
.headline{font-size:15px;background:#f7f9fc;border:1px solid #dde;padding:8px 14px}
code{font-size:11px} details pre{white-space:pre-wrap;font-size:11px;background:#f8f8f8;padding:6px}
.muted{color:#777}
"""


def _st(st: str | None) -> str:
    cls = "ok" if st == "ok" else "bad" if st in ("wrong_result", "compile_error", "crash", "timeout") else "other"
    return f'<span class="{cls}">{escape(st or "")}</span>'


def render_html(records: list[dict], summary: dict, meta: dict) -> str:
    comps = summary["compilers"]
    pc = summary["per_compiler"]
    H = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>dynacap corpus report</title>",
         f"<style>{_CSS}</style></head><body>", "<h1>dynacap corpus report</h1>",
         f"<p class='muted'>{summary['cases']} cases in {summary['projects']} projects; compilers "
         f"{escape(', '.join(comps))}; backend <code>{escape(str(meta.get('backend')))}</code>, "
         f"fullgraph={escape(str(meta.get('fullgraph')))}; generated "
         f"{datetime.datetime.now().isoformat(timespec='seconds')}.</p>"]
    if meta.get("command"):
        H.append(f"<p>Command: <code>{escape(meta['command'])}</code></p>")
    H.append("<div class='headline'>" + "<br>".join(escape(x) for x in headline_lines(summary)) + "</div>")
    H += [f"<p class='muted'>{escape(x)}</p>" for x in compiling_note(summary)]
    H.append("<h2>Statuses</h2>")
    H.append(charts.stacked([(c, pc[c]["status"]) for c in comps], list(STATUSES), "Share of cases per status"))
    H.append("<table><tr><th>status</th>" + "".join(f"<th>{escape(c)}</th>" for c in comps) + "</tr>")
    for st in STATUSES:
        H.append(f"<tr><td>{_st(st)}</td>" + "".join(
            f"<td class='n'>{pc[c]['status'][st]}</td>" for c in comps) + "</tr>")
    H.append("</table>")
    H.append("<h2>Graph breaks by reason (top 20)</h2>")
    for c in comps:
        s = pc[c]
        if not s["break_reasons"]:
            H.append(f"<p>{escape(c)}: no graph breaks.</p>")
            continue
        H.append(charts.hbar([(d["reason"], {c: d["count"]}) for d in s["break_reasons"]], [c],
                             f"{c}: {s['break_count_total']} breaks", label_w=330))
        H.append("<table><tr><th>#</th><th>reason</th><th>breaks</th><th>cases</th><th>example locations</th></tr>")
        for i, d in enumerate(s["break_reasons"], 1):
            det = f"<div class='muted'>{escape(d['detail'])}</div>" if d.get("detail") else ""
            H.append(f"<tr><td class='n'>{i}</td><td>{escape(d['reason'])}{det}</td><td class='n'>{d['count']}</td>"
                     f"<td class='n'>{d['cases']}</td><td>" +
                     "<br>".join(f"<code>{escape(_short_loc(x))}</code>" for x in d["locations"]) + "</td></tr>")
        H.append("</table>")
    if comps:
        buckets = [b for b, _ in pc[comps[0]]["graphs_hist"]]
        H.append("<h2>Graphs per case</h2>")
        H.append(charts.vbar(buckets, {c: [n for _, n in pc[c]["graphs_hist"]] for c in comps},
                             "Graphs per case (ok or wrong_result)", xlabel="graphs"))
        H.append("<h2>Compile time and overhead</h2>")
        tb = [b for b, _ in pc[comps[0]]["first_call_hist"]]
        H.append(charts.vbar(tb, {c: [n for _, n in pc[c]["first_call_hist"]] for c in comps},
                             "First call (capture + compile + run)", xlabel="seconds"))
        ob = [b for b, _ in pc[comps[0]]["overhead_hist"]]
        H.append(charts.vbar(ob, {c: [n for _, n in pc[c]["overhead_hist"]] for c in comps},
                             "Steady-state overhead: captured / eager median per call", xlabel="ratio"))
        H.append("<table><tr><th>compiler</th><th>median first call</th><th>median overhead</th>"
                 "<th>geomean overhead</th><th>largest max error (passing or wrong)</th></tr>")
        for c in comps:
            s = pc[c]
            ov, gm, me = s["overhead_median"], s["overhead_geomean"], s["max_error_max"]
            H.append(f"<tr><td>{escape(c)}</td><td class='n'>{_s(s['first_call_median_s'])}</td>"
                     f"<td class='n'>{'' if ov is None else f'{ov:.2f}x'}</td>"
                     f"<td class='n'>{'' if gm is None else f'{gm:.2f}x'}</td>"
                     f"<td class='n'>{'' if me is None else f'{me:.3g}'}</td></tr>")
        H.append("</table>")
        H.append("<h2>Projects</h2><table><tr><th>project</th><th>cases</th>" +
                 "".join(f"<th>{escape(c)} ok</th><th>{escape(c)} statuses</th>" for c in comps) + "</tr>")
        rows = {c: {r["project"]: r for r in pc[c]["project_rows"]} for c in comps}
        for p in sorted(rows[comps[0]]):
            H.append(f"<tr><td>{escape(p)}</td><td class='n'>{rows[comps[0]][p]['cases']}</td>" + "".join(
                f"<td class='n'>{rows[c].get(p, {}).get('ok', '')}</td><td>" +
                ", ".join(f"{escape(k)}: {v}" for k, v in sorted(rows[c].get(p, {}).get("statuses", {}).items())) +
                "</td>" for c in comps) + "</tr>")
        H.append("</table>")
    comp = summary.get("comparison")
    if comp:
        a, b = comp["a"], comp["b"]
        H.append(f"<h2>Side by side: {escape(a)} vs {escape(b)}</h2>")
        H.append(f"<p>Same status on {comp['same_status']} of {len(comp['rows'])} cases.</p>")
        H.append(f"<table><tr><th>{escape(a)} status</th><th>{escape(b)} status</th><th>cases</th></tr>")
        for x in comp["crosstab"]:
            H.append(f"<tr><td>{_st(x['a'])}</td><td>{_st(x['b'])}</td><td class='n'>{x['count']}</td></tr>")
        H.append("</table>")
        H.append(f"<table><tr><th>case</th><th>{escape(a)}</th><th>graphs</th><th>breaks</th><th>first call</th>"
                 f"<th>overhead</th><th>{escape(b)}</th><th>graphs</th><th>breaks</th><th>first call</th>"
                 f"<th>overhead</th></tr>")
        for r in comp["rows"]:
            cells = []
            for c in (a, b):
                x = r[c]
                ov = as_float(x.get("overhead"))
                cells.append(f"<td>{_st(x.get('status'))}</td><td class='n'>{x.get('graph_count', '') if x.get('graph_count') is not None else ''}</td>"
                             f"<td class='n'>{x.get('graph_break_count') if x.get('graph_break_count') is not None else ''}</td>"
                             f"<td class='n'>{_s(x.get('first_call_s'))}</td>"
                             f"<td class='n'>{'' if ov is None else f'{ov:.2f}x'}</td>")
            H.append(f"<tr><td><code>{escape(r['id'])}</code></td>{''.join(cells)}</tr>")
        H.append("</table>")
    H.append("<h2>Not passing</h2>")
    any_fail = False
    for rec in sorted(records, key=lambda r: r["id"]):
        for c in comps:
            r = (rec.get("results") or {}).get(c)
            if not r or r.get("status") == "ok":
                continue
            any_fail = True
            prep = rec.get("prepare") or {}
            err = r.get("error") or prep.get("error") or ""
            tb = r.get("traceback") or prep.get("traceback") or r.get("stderr_tail") or prep.get("stderr_tail") or ""
            stub = prep.get("stubbed_imports")
            extra = f" <span class='muted'>stubbed: {escape(', '.join(stub))}</span>" if stub else ""
            H.append(f"<details><summary><code>{escape(rec['id'])}</code> {escape(c)}: {_st(r.get('status'))} "
                     f"{escape(_first_line(err))}{extra}</summary><pre>{escape(tb[-6000:])}</pre></details>")
    if not any_fail:
        H.append("<p>None.</p>")
    sbs = summary.get("sandbox") or {}
    if sbs.get("cases"):
        H.append("<h2>Sandbox</h2><p>Protections of the case workers (see the threat model in "
                 f"docs/corpus.md), over the {sbs['cases']} cases that reported one:</p>"
                 "<table><tr><th>protection</th><th>cases with it</th></tr>")
        for name, n in sbs["active"].items():
            cls = "ok" if n == sbs["cases"] else "bad"
            H.append(f"<tr><td>{escape(name)}</td><td class='n {cls}'>{n}/{sbs['cases']}</td></tr>")
        H.append("</table>")
        sb = next((r.get("sandbox") for r in records if r.get("sandbox")), None)
        H.append(f"<p class='muted'>Sandbox report of one case: {escape(str(sb))}</p>")
    H.append("</body></html>")
    return "\n".join(H)


def write_reports(out_dir: str, records: list[dict], meta: dict) -> dict:
    summary = summarize(records)
    with open(os.path.join(out_dir, "report.md"), "w", encoding="utf-8") as f:
        f.write(render_md(records, summary, meta))
    with open(os.path.join(out_dir, "report.html"), "w", encoding="utf-8") as f:
        f.write(render_html(records, summary, meta))
    return summary
