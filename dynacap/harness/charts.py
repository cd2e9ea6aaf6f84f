"""Inline SVG charts for the offline HTML report (no JavaScript, no CDN).

Pure functions from numbers to SVG markup strings.  They must not read files,
fetch anything, or know about cases.
"""
from __future__ import annotations

import math
from html import escape

PALETTE = {"dynacap": "#1f77b4", "dynamo": "#ff7f0e"}
STATUS_COLORS = {"ok": "#2ca02c", "wrong_result": "#d62728", "compile_error": "#9467bd",
                 "eager_error": "#8c564b", "import_error": "#7f7f7f", "timeout": "#bcbd22",
                 "crash": "#e377c2", "nondeterministic": "#17becf"}
_EXTRA = ("#2ca02c", "#d62728", "#9467bd", "#8c564b")


def color(series: str, i: int = 0) -> str:
    return PALETTE.get(series) or STATUS_COLORS.get(series) or _EXTRA[i % len(_EXTRA)]


def ticks(vmax: float, n: int = 4) -> list[int]:
    """Gridline counts 0, step, 2*step... up to the first at or above ``vmax`` (about ``n``
    steps; a step is a whole 1, 2, 2.5 or 5 times a power of ten), so that each label is
    exactly its line's value."""
    raw = max(vmax, 1) / n
    mag = 10 ** math.floor(math.log10(raw)) if raw >= 1 else 1
    step = next(int(m * mag) for m in (1, 2, 2.5, 5, 10) if m * mag >= raw and (m * mag) % 1 == 0)
    count = math.ceil(max(vmax, 1) / step)
    return [k * step for k in range(count + 1)]


def hbar(rows: list[tuple[str, dict]], series: list[str], title: str, width: int = 760,
         label_w: int = 300, unit: str = "") -> str:
    """Horizontal grouped bars: one group per row label, one bar per series."""
    bar_h, gap = 14, 8
    group_h = bar_h * len(series) + gap
    height = 40 + group_h * max(1, len(rows)) + 20 * bool(len(series) > 1)
    vmax = max([v for _, d in rows for v in d.values()] + [1])
    plot_w = width - label_w - 60
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'role="img" aria-label="{escape(title)}" font-family="sans-serif" font-size="11">',
           f'<text x="4" y="16" font-size="13" font-weight="bold">{escape(title)}</text>']
    y = 30
    for label, d in rows:
        n = max(10, int(label_w / 6.3))
        short = label if len(label) <= n else label[:n - 3] + "..."
        out.append(f'<text x="{label_w - 6}" y="{y + group_h / 2}" text-anchor="end">'
                   f'<title>{escape(label)}</title>{escape(short)}</text>')
        for i, s in enumerate(series):
            v = d.get(s, 0) or 0
            w = plot_w * v / vmax
            out.append(f'<rect x="{label_w}" y="{y + i * bar_h}" width="{w:.1f}" height="{bar_h - 2}" '
                       f'fill="{color(s, i)}"><title>{escape(s)}: {v:g}{unit}</title></rect>')
            out.append(f'<text x="{label_w + w + 4:.1f}" y="{y + i * bar_h + bar_h - 4}">{v:g}{unit}</text>')
        y += group_h
    if len(series) > 1:
        x = label_w
        for i, s in enumerate(series):
            out.append(f'<rect x="{x}" y="{y + 2}" width="10" height="10" fill="{color(s, i)}"/>'
                       f'<text x="{x + 14}" y="{y + 11}">{escape(s)}</text>')
            x += 110
    out.append("</svg>")
    return "".join(out)


def vbar(buckets: list[str], data: dict[str, list[int]], title: str, width: int = 760,
         height: int = 230, xlabel: str = "") -> str:
    """Vertical grouped bars (histograms): ``data[series][i]`` is the count of bucket i."""
    series = list(data)
    left, bottom, top = 40, 40, 30
    plot_w, plot_h = width - left - 10, height - bottom - top
    grid = ticks(max([v for vals in data.values() for v in vals] + [1]))
    vmax = grid[-1]
    gw = plot_w / max(1, len(buckets))
    bw = (gw - 6) / max(1, len(series))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'role="img" aria-label="{escape(title)}" font-family="sans-serif" font-size="11">',
           f'<text x="4" y="16" font-size="13" font-weight="bold">{escape(title)}</text>',
           f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="#444"/>']
    for v in grid:
        yy = top + plot_h - plot_h * v / vmax
        out.append(f'<text x="{left - 4}" y="{yy + 4:.1f}" text-anchor="end" fill="#666">{v:g}</text>'
                   f'<line x1="{left}" y1="{yy:.1f}" x2="{left + plot_w}" y2="{yy:.1f}" stroke="#eee"/>')
    for bi, b in enumerate(buckets):
        x0 = left + bi * gw + 3
        for si, s in enumerate(series):
            v = data[s][bi] if bi < len(data[s]) else 0
            h = plot_h * v / vmax
            out.append(f'<rect x="{x0 + si * bw:.1f}" y="{top + plot_h - h:.1f}" width="{bw - 1:.1f}" '
                       f'height="{h:.1f}" fill="{color(s, si)}"><title>{escape(s)} {escape(b)}: {v}</title></rect>')
            if v:
                out.append(f'<text x="{x0 + si * bw + bw / 2:.1f}" y="{top + plot_h - h - 2:.1f}" '
                           f'text-anchor="middle" font-size="9">{v}</text>')
        out.append(f'<text x="{x0 + gw / 2 - 3:.1f}" y="{top + plot_h + 14}" text-anchor="middle">{escape(b)}</text>')
    if xlabel:
        out.append(f'<text x="{left + plot_w / 2}" y="{height - 4}" text-anchor="middle" fill="#444">'
                   f'{escape(xlabel)}</text>')
    x = width - 10 - 110 * len(series)
    for i, s in enumerate(series):
        out.append(f'<rect x="{x}" y="6" width="10" height="10" fill="{color(s, i)}"/>'
                   f'<text x="{x + 14}" y="15">{escape(s)}</text>')
        x += 110
    out.append("</svg>")
    return "".join(out)


def stacked(rows: list[tuple[str, dict]], order: list[str], title: str, width: int = 760) -> str:
    """One 100% stacked bar per row (e.g. status shares per compiler)."""
    label_w, bar_h = 90, 22
    height = 50 + (bar_h + 10) * len(rows) + 20
    plot_w = width - label_w - 10
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'role="img" aria-label="{escape(title)}" font-family="sans-serif" font-size="11">',
           f'<text x="4" y="16" font-size="13" font-weight="bold">{escape(title)}</text>']
    y = 30
    for label, d in rows:
        total = sum(d.values()) or 1
        out.append(f'<text x="{label_w - 6}" y="{y + 15}" text-anchor="end">{escape(label)}</text>')
        x = label_w
        for s in order:
            v = d.get(s, 0)
            if not v:
                continue
            w = plot_w * v / total
            out.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{color(s)}">'
                       f'<title>{escape(s)}: {v} ({100 * v / total:.1f}%)</title></rect>')
            if w > 28:
                out.append(f'<text x="{x + w / 2:.1f}" y="{y + 15}" text-anchor="middle" fill="#fff">'
                           f'{100 * v / total:.0f}%</text>')
            x += w
        y += bar_h + 10
    x = 10
    for s in order:
        out.append(f'<rect x="{x}" y="{y + 2}" width="10" height="10" fill="{color(s)}"/>'
                   f'<text x="{x + 13}" y="{y + 11}">{escape(s)}</text>')
        x += 24 + 6.5 * len(s)
    out.append("</svg>")
    return "".join(out)
