#!/usr/bin/env python3
"""Line charts for lab summaries, as standalone SVG: one line per series.

    import chart
    svg = chart.lines("Requests/s against clients", "clients", "requests/s",
                      {"stoa": [(1, 900.0, 850.0, 950.0), (2, ...)], "apache2 event": [...]},
                      log2_x=True)

Each point is (x, median) or (x, median, min, max): the spread is drawn as a
vertical bar. Up to 16 series get 16 distinct colours (Kelly's list of
maximum contrast, less its white and black); x ticks are the x values
themselves (whole numbers of clients stay whole, on a log2 axis when
log2_x); y starts at 0 so heights compare.
"""

import math

# Kelly (1965), 22 colours of maximum contrast; white and black left out,
# the light yellow last
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
           "#bcbd22", "#7f7f7f", "#f3c300", "#875692", "#008856", "#f38400", "#0067a5", "#e25822"]

W, H = 760, 420
ML, MR, MT, MB = 70, 180, 40, 50


def _esc(s):
    return str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _nice_max(v):
    if v <= 0:
        return 1.0
    e = 10 ** math.floor(math.log10(v))
    for m in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if m * e >= v:
            return m * e
    return 10 * e


def _fmt(v):
    if v >= 1000:
        return "{:,.0f}".format(v)
    if v == int(v):
        return "%d" % v
    return "%g" % v


def lines(title, xlabel, ylabel, series, log2_x=False):
    """The SVG text of a line chart of series {name: [(x, y[, lo, hi]), ...]}."""
    if len(series) > len(PALETTE):
        raise ValueError("at most %d series (got %d)" % (len(PALETTE), len(series)))
    xs = sorted({p[0] for pts in series.values() for p in pts})
    ys = [p[3] if len(p) > 3 else p[1] for pts in series.values() for p in pts]
    if not xs:
        return '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="60"><text x="10" y="30">%s: no data</text></svg>\n' % (W, _esc(title))
    ymax = _nice_max(max(ys) if ys else 1)
    pw, ph = W - ML - MR, H - MT - MB

    def fx(x):
        if len(xs) == 1:
            return ML + pw / 2
        if log2_x:
            a, b = math.log2(xs[0]), math.log2(xs[-1])
            return ML + pw * (math.log2(x) - a) / (b - a)
        return ML + pw * (x - xs[0]) / (xs[-1] - xs[0])

    def fy(y):
        return MT + ph * (1 - y / ymax)

    o = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">' % (W, H, W, H),
         '<rect width="100%" height="100%" fill="white"/>',
         '<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>' % (ML, _esc(title))]
    for i in range(6):
        y = ymax * i / 5
        o.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>' % (ML, ML + pw, fy(y), fy(y)))
        o.append('<text x="%d" y="%.1f" text-anchor="end">%s</text>' % (ML - 6, fy(y) + 4, _fmt(y)))
    for x in xs:
        o.append('<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#eee"/>' % (fx(x), fx(x), MT, MT + ph))
        o.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>' % (fx(x), MT + ph + 16, _fmt(x)))
    o.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/>' % (ML, MT, pw, ph))
    o.append('<text x="%.1f" y="%d" text-anchor="middle">%s%s</text>' % (ML + pw / 2, H - 10, _esc(xlabel), " (log2 scale)" if log2_x else ""))
    o.append('<text transform="translate(16,%.1f) rotate(-90)" text-anchor="middle">%s</text>' % (MT + ph / 2, _esc(ylabel)))
    for k, (name, pts) in enumerate(series.items()):
        col = PALETTE[k]
        pts = sorted(pts)
        if pts:
            o.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>' % (
                col, " ".join("%.1f,%.1f" % (fx(p[0]), fy(p[1])) for p in pts)))
        for p in pts:
            if len(p) > 3:
                o.append('<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s"/>' % (fx(p[0]), fx(p[0]), fy(p[2]), fy(p[3]), col))
            o.append('<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s, %s: %s</title></circle>' % (
                fx(p[0]), fy(p[1]), col, _esc(name), _fmt(p[0]), _fmt(p[1])))
        ly = MT + 8 + 18 * k
        o.append('<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="3"/>' % (W - MR + 12, W - MR + 32, ly, ly, col))
        o.append('<text x="%d" y="%d">%s</text>' % (W - MR + 38, ly + 4, _esc(name)))
    o.append("</svg>")
    return "\n".join(o) + "\n"
