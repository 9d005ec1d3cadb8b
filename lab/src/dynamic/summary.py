#!/usr/bin/env python3
"""summary.py OUT ROWS.tsv QUICK MACHINE RUNS.tsv PARAMS > summary.md

The dynamic-routes summary: figure 5 (BENCH1), table 1, figure 6 (BENCH2),
BENCH3's errors and figures 7-8 (BENCH4) from the stoa bench JSON files in
OUT/raw, each beside what the paper reports, and SVG charts (fig6-*.svg,
fig7-*.svg, fig8-*.svg) in OUT. ROWS.tsv: row, tag, route, front end,
status, when (UTC time and 1-min load average at its start and end);
RUNS.tsv: the runs that made the rows (time, command, load averages at the
start and the end, which rows). OUT/notes.md, if present, is appended."""
import glob, json, os, re, sys
from statistics import median

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import verdict  # noqa: E402 (lab/src/verdict.py)

out, rows_tsv, quick, machine, runs_tsv, params = sys.argv[1:7]
rows = [(l.rstrip("\n").split("\t") + [""])[:6] for l in open(rows_tsv) if l.strip()]
runs = [l.rstrip("\n").split("\t") for l in open(runs_tsv) if l.strip()]


def load(tag):
    try:
        return json.load(open(os.path.join(out, "raw", tag + ".json")))
    except (OSError, ValueError):
        return None


def name(row):
    front, route, db = row.split(":")
    return "%s %s" % ("Stoa" if front == "stoa" else "Apache", route)


def rsfx(rep):
    """The suffix of a repeat's raw files: none for the first, -rN after."""
    return "" if rep == 1 else "-r%d" % rep


def fmt(x, d=1):
    return "-" if x is None else ("%.*f" % (d, x))


# ---------------------------------------------------------------- SVG
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
           "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939"]


def chart(path, title, xlabel, ylabel, series, log_ok=True):
    """series: [(label, [(x, y)...], dashed)] -> an SVG line chart."""
    import math
    pts = [p for _, s, _ in series for p in s if p[1] is not None]
    if not pts:
        return False
    W, H, L, R, T, B = 760, 420, 70, 230, 40, 50
    x0, x1 = min(p[0] for p in pts), max(p[0] for p in pts)
    y1 = max(p[1] for p in pts) * 1.05 or 1
    x1 = x1 if x1 > x0 else x0 + 1
    sx = lambda x: L + (x - x0) / (x1 - x0) * (W - L - R)
    pos = [p[1] for p in pts if p[1] > 0]
    # A log axis when the routes are orders of magnitude apart (CGI).
    logy = log_ok and bool(pos) and max(pos) / min(pos) > 30
    if logy:
        lo = 10 ** math.floor(math.log10(min(pos)))
        hi = 10 ** math.ceil(math.log10(max(pos)))
        sy = lambda y: H - B - (math.log10(max(y, lo)) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) * (H - T - B)
        ylabel += " (log scale)"
    else:
        sy = lambda y: H - B - y / y1 * (H - T - B)
    o = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">' % (W, H),
         '<rect width="100%" height="100%" fill="white"/>',
         '<text x="%d" y="22" font-size="15">%s</text>' % (L, title),
         '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (L, H - B, W - R, H - B),
         '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (L, T, L, H - B),
         '<text x="%d" y="%d" text-anchor="middle">%s</text>' % ((L + W - R) / 2, H - 12, xlabel),
         '<text x="16" y="%d" transform="rotate(-90 16 %d)" text-anchor="middle">%s</text>' % ((T + H - B) / 2, (T + H - B) / 2, ylabel)]
    yticks = []
    if logy:
        d = lo
        while d <= hi * 1.0001:
            yticks += [v for v in (d, 2 * d, 5 * d) if v <= hi * 1.0001]
            d *= 10
    else:
        yticks = [y1 * i / 5 for i in range(6)]
    for y in yticks:
        o.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>' % (L, sy(y), W - R, sy(y)))
        o.append('<text x="%d" y="%.1f" text-anchor="end">%s</text>' % (
            L - 4, sy(y) + 4, "%d" % y if y >= 1 and y == int(y) else "%.3g" % y))
    for i in range(6):
        x = x0 + (x1 - x0) * i / 5
        o.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>' % (sx(x), H - B + 16, ("%.3g" % x)))
    for k, (label, s, dashed) in enumerate(series):
        c = COLOURS[k % len(COLOURS)]
        s = [p for p in s if p[1] is not None]
        if s:
            o.append('<polyline fill="none" stroke="%s" stroke-width="1.6"%s points="%s"/>' % (
                c, ' stroke-dasharray="5,3"' if dashed else "",
                " ".join("%.1f,%.1f" % (sx(x), sy(y)) for x, y in s)))
        o.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>' % (
            W - R + 10, T + 10 + 16 * k, W - R + 30, T + 10 + 16 * k, c, ' stroke-dasharray="5,3"' if dashed else ""))
        o.append('<text x="%d" y="%d">%s</text>' % (W - R + 34, T + 14 + 16 * k, label))
    o.append("</svg>")
    open(os.path.join(out, path), "w").write("\n".join(o) + "\n")
    return True


# ---------------------------------------------------------------- text
P = print
P("# dynamic-routes: the comments application per route, BENCH1-BENCH4\n")
P("On %s; quick=%s. %s:\n" % (machine, quick, "The run" if len(runs) == 1 else
    "The rows come from %d runs (each row's own time and load average are in the rows table)" % len(runs)))
for when, cmd, l0, l1, which in runs:
    P("- %s: `%s` (%s); load average (1, 5, 15 min) at the start %s, at the end %s" % (when, cmd, which, l0, l1))
P("\nThe machine was shared with other sessions' builds and tests%s, so absolute figures are noisy "
  "(provisional); compare the shapes and the order of the routes. The servers and databases ran on CPU %s, "
  "`stoa bench` on CPU %s (taskset). Rows outside FULL_ROWS (see the parameters) ran BENCH4 only.\n" % (
      " (a **quick run**: seconds per benchmark, indicative only)" if quick == "1" else "",
      params.split("SERVER_CPUS=")[1].split()[0] if "SERVER_CPUS=" in params else "any",
      params.split("LOAD_CPUS=")[1].split()[0] if "LOAD_CPUS=" in params else "any"))
P("Parameters: %s.\n" % params)
P("""The application (lab/src/dynamic/, the paper's Figures 1-4): a form POST
(name, email, comments) inserted into a table, and a page that runs `SELECT *`
on a table and prints it as an HTML table. The tables hold fixed rows sized so
that the page is the paper's: 73.5 KB (75,264 bytes) for BENCH1, 195 KB for
BENCH2, 50 KB for BENCH3 and BENCH4; every route answers byte for byte the
same page (checked before its runs, with a POST read back). SQLite is one file;
PostgreSQL is a private cluster (initdb, Unix socket; JDBC over 127.0.0.1).
Every request opens a new connection (no keep-alive), as the paper's Perl and
JMeter clients did. Apache is 2.4 with the prefork MPM as 1.3 was (30 children
at start, 10-50 spare, 1000 connections per child, no access log), one
instance per technology with only its modules; Stoa runs every route in one
server (its number of workers is in the rows table).
""")
P("## The rows\n")
P("| row | route | front end | status | run at (1-min load average at its start to its end) |")
P("|---|---|---|---|---|")
for row, tag, label, how, status, when in rows:
    front, route, db = row.split(":")
    P("| %s | %s on %s | %s: %s | %s | %s |" % (tag, label, "SQLite" if db == "sqlite" else "PostgreSQL",
                                             "Stoa" if front == "stoa" else "Apache", how, status, when or "-"))
ran = [r for r in rows if r[4] == "ok"]

for db, dbname in (("sqlite", "SQLite"), ("pg", "PostgreSQL")):
    mine = [r for r in ran if r[0].endswith(":" + db)]
    if not mine:
        continue
    P("\n## %s\n" % dbname)
    # ------------------------------------------------ figure 5, table 1
    thinks = sorted({int(m.group(1)) for r in mine for f in glob.glob(os.path.join(out, "raw", r[1] + "-b1-think*.json"))
                     for m in [re.search(r"-b1-think(\d+)(-knee)?\.json$", f)] if m})
    knees = any(load("%s-b1-think%d-knee" % (r[1], t)) for r in mine for t in thinks)
    if thinks and knees:
        # The cap each row's search started from at each think time: a
        # MERGE run with a higher B1_CAP (and B1_THINKS) leaves the other
        # cells at the cap they ran with. Repeat 1 probes its cap first.
        caps = {}
        for r in mine:
            for t in thinks:
                k1 = load("%s-b1-think%d-knee" % (r[1], t))
                c = k1 and (k1.get("cap") or (k1["probes"][0]["clients"] if k1.get("probes") else None))
                if c:
                    caps.setdefault(c, []).append((name(r[0]), t))
        main_cap = max(caps, key=lambda c: len(caps[c])) if caps else params.split("B1_CAP=")[1].split()[0]
        def cells(rts):
            by_row = {}
            for row_name, t in rts:
                by_row.setdefault(row_name, []).append(t)
            return ", ".join("%s at T = %s s" % (rn, ", ".join(map(str, ts))) for rn, ts in by_row.items())
        cap_text = "%s%s" % (main_cap, "".join(
            "; %d for %s" % (c, cells(caps[c])) for c in sorted(caps) if c != main_cap))
        P("### Figure 5 (BENCH1): clients served before a response took over 3 s (knee search)\n")
        P("For each think time T, probes of N clients (all started, each first request after a uniform 0..T s, "
          "then uniform 1..T s between requests, seed 1, a new connection per request), %s each (at least T + 3 s), the front end "
          "restarted before each when RESTART=every; a probe fails at the paper's rule, a response (or a wait) over 3 s, or at a failed or non-2xx response (a full queue's 503 "
          "is a client not served either). N = the cap "
          "(%s) is probed first, then bisected on a log scale to within %sx. Cell: the largest N served (\"≥N\": the cap "
          "was served) and the first N that failed, with \"refused\" when a request there failed (a 503 from a full queue, say) before any response took 3 s. Traffic (table 1): KB/s received in the largest served probe, "
          "so at (or, when capped, below) saturation, not the load of a ramp.\n" % (
              params.split("B1_PROBE=")[1].split()[0], cap_text,
              params.split("B1_PRECISION=")[1].split()[0]))
        P("| row | " + " | ".join("T = %d s: clients" % t for t in thinks) + " | " +
          " | ".join("T = %d s: KB/s" % t for t in thinks) + " | mean KB/s |")
        P("|---|" + "---|" * (2 * len(thinks) + 1))
        nrep = 1
        for r in mine:
            cl, tr = [], []
            for t in thinks:
                ks = [k for k in (load("%s-b1-think%d%s-knee" % (r[1], t, rsfx(rep))) for rep in range(1, 100)) if k]
                if not ks:
                    cl.append("-"); tr.append(None); continue
                nrep = max(nrep, len(ks))
                k = ks[0]
                if len(ks) == 1:
                    # Why the first failing probe failed: a late response, or
                    # a refused one (a full queue's 503).
                    fp = [p for p in k.get("probes", []) if p.get("clients") == k["failed_at"]]
                    why = ", refused" if fp and (fp[0].get("failed") or fp[0].get("non_2xx")) else ""
                    cl.append(("≥%d" % k["knee"]) if k["capped"] else "%d (failed at %s%s)" % (k["knee"], k["failed_at"], why))
                    tr.append(k.get("kb_per_s_at_knee"))
                    continue
                # Repeats: the median knee (≥: the cap), then every repeat's, in order.
                med = sorted(ks, key=lambda x: x["knee"])[(len(ks) - 1) // 2]
                cl.append("%s%d (%s)" % ("≥" if med["capped"] else "", med["knee"],
                                         ", ".join(("≥%d" if x["capped"] else "%d") % x["knee"] for x in ks)))
                kb = sorted(x["kb_per_s_at_knee"] for x in ks if x.get("kb_per_s_at_knee") is not None)
                tr.append(kb[(len(kb) - 1) // 2] if kb else None)
            ok = [x for x in tr if x is not None]
            P("| %s | %s | %s | %s |" % (name(r[0]), " | ".join(cl), " | ".join(fmt(x, 0) for x in tr),
                                         fmt(sum(ok) / len(ok), 0) if ok else "-"))
        if nrep > 1:
            P("\nRows with %d repeats: the median knee, then each repeat's in order (a repeat's search starts from "
              "the knee of the one before); KB/s: the median over the repeats." % nrep)
        P("""
The paper (PIII 733 MHz, Apache 1.3, PostgreSQL 7.1, a client every 2 s):
FastCGI served the most clients at every think time (up to the 97-98 its
client machine could fork); mod_perl doubled its clients from T = 5 to 8;
PHP grew non-linearly; servlets served 75% fewer clients than FastCGI. CGI
was left out: "orders of magnitude" behind. Table 1, average traffic in KB/s:
FastCGI 2250, mod_perl 1631, PHP 1248, servlets 801.
""")
    elif thinks:
        P("### Figure 5 (BENCH1): clients served before a response took over 3 s\n")
        P("A client more every %s (up to the cap), each thinking a uniform %s..T s before its first request "
          "and 1..T s between requests (seed 1, so every row gets the same clients and pauses), the run stopped at the first response over 3 s. \"≥N\": "
          "the ramp's cap was reached without a slow response. Traffic: bytes received per second over "
          "the run (table 1).\n" % (params.split("B1_EVERY=")[1].split()[0], params.split("B1_FIRST_MIN=")[1].split()[0]))
        P("| row | " + " | ".join("T = %d s: clients" % t for t in thinks) + " | " +
          " | ".join("T = %d s: KB/s" % t for t in thinks) + " | mean KB/s |")
        P("|---|" + "---|" * (2 * len(thinks) + 1))
        for r in mine:
            cl, tr = [], []
            for t in thinks:
                d = load("%s-b1-think%d" % (r[1], t))
                if not d:
                    cl.append("-"); tr.append(None); continue
                a = d.get("abort")
                if a:
                    cl.append("%d (at %.0f s)" % (a["active_clients"], a["at_s"]))
                else:
                    cl.append("≥%d" % d.get("active_peak", 0))
                tr.append(d["bytes"]["received"] / max(d["duration_s"], 1e-9) / 1024)
            ok = [x for x in tr if x is not None]
            P("| %s | %s | %s | %s |" % (name(r[0]), " | ".join(cl), " | ".join(fmt(x, 0) for x in tr),
                                         fmt(sum(ok) / len(ok), 0) if ok else "-"))
        P("""
The paper (PIII 733 MHz, Apache 1.3, PostgreSQL 7.1, a client every 2 s):
FastCGI served the most clients at every think time (up to the 97-98 its
client machine could fork); mod_perl doubled its clients from T = 5 to 8;
PHP grew non-linearly; servlets served 75% fewer clients than FastCGI. CGI
was left out: "orders of magnitude" behind. Table 1, average traffic in KB/s:
FastCGI 2250, mod_perl 1631, PHP 1248, servlets 801.
""")
    # ------------------------------------------------ figure 6
    # Each row's BENCH2 repeats (ROW-b2, ROW-b2-r2 ...): per level the
    # median of the repeats' mean times, failures summed.
    series, table = [], []
    for r in mine:
        reps = [d for d in (load(r[1] + "-b2" + rsfx(k)) for k in range(1, 100)) if d]
        per = {}
        for d in reps:
            for e in d.get("levels", []):
                if e.get("active") and e.get("mean_ms") is not None:
                    per.setdefault(e["active"], []).append(e["mean_ms"])
        lv = {k: median(v) for k, v in per.items()}
        if lv:
            series.append((name(r[0]), sorted(lv.items()), r[0].startswith("apache")))
            table.append((r, lv, sum(d.get("failed", 0) for d in reps), len(reps)))
    if table:
        P("### Figure 6 (BENCH2): mean response time (ms) against concurrent clients\n")
        P("A client more every %s up to %s, each requesting the 195 KB page back to back; "
          "stoa bench's `levels` table (requests filed under the clients running when they started). "
          "Where a row ran BENCH2 more than once, each cell is the median of its repeats' mean times "
          "and `failed` their sum.\n" % (
              params.split("B2_STEP=")[1].split()[0], params.split("B2_MAX=")[1].split()[0]))
        top = max(max(lv) for _, lv, _, _ in table)
        cols = sorted({c for c in (1, 2, 5, 10, 15, 20, top) if c <= top})
        P("| row | " + " | ".join("%d clients" % c for c in cols) + " | ms per added client | failed | repeats |")
        P("|---|" + "---|" * (len(cols) + 3))
        for r, lv, failed, n in table:
            xs = sorted(k for k in lv if lv[k] is not None)
            slope = None
            if len(xs) > 1:
                mx = sum(xs) / len(xs); my = sum(lv[x] for x in xs) / len(xs)
                den = sum((x - mx) ** 2 for x in xs)
                slope = sum((x - mx) * (lv[x] - my) for x in xs) / den if den else None
            P("| %s | %s | %s | %d | %d |" % (name(r[0]), " | ".join(fmt(lv.get(c)) for c in cols), fmt(slope, 2), failed, n))
        if chart("fig6-%s.svg" % db, "Figure 6 (BENCH2, %s): mean time vs clients" % dbname,
                 "concurrent clients", "mean response time (ms)", series, log_ok=False):
            P("\n![figure 6](fig6-%s.svg)  (Apache dashed; all runs in `compare-%s-b2.html`)" % (db, db))
        res = [(r, [x for x in (load(r[1] + "-b2" + rsfx(k) + "-resources") for k in range(1, n + 1)) if x])
               for r, _, _, n in table]
        res = [(r, xs) for r, xs in res if xs]
        if res:
            P("\nWhat each row cost during BENCH2 (the measured run): CPU time of the processes doing its work "
              "(front end, back end, PostgreSQL on PostgreSQL rows; reaped children included) per response, "
              "their largest resident memory (sampled every 0.5 s; PostgreSQL's not included), and the most "
              "database connections open at once (PostgreSQL: those the row's processes hold; the Apache rows, run before "
              "2026-11-28, counted the database's backends, those of any server then up; SQLite: open descriptors of "
              "its file). On Stoa rows the processes are the one Stoa that serves every route, with all "
              "its pools (8 Perl FastCGI processes among them), so their memory is not the route's alone; on Apache rows "
              "each technology has its own instance. Over several repeats: the median CPU time with its "
              "range, the largest memory and connections of any.\n")
            P("| row | processes | CPU ms per request | memory (MB, max) | database connections (max) |")
            P("|---|---|---|---|---|")
            for r, xs in res:
                cpu = [x["cpu_ms_per_request"] for x in xs if x.get("cpu_ms_per_request") is not None]
                rss = [x["rss_kb_max"] for x in xs if x.get("rss_kb_max")]
                conns = [x["db_connections_max"] for x in xs if x.get("db_connections_max") is not None]
                P("| %s | %s | %s | %s | %s |" % (
                    name(r[0]), ", ".join(xs[0]["servers"]),
                    "-" if not cpu else fmt(median(cpu), 2) + ("" if len(cpu) == 1 else " (%s-%s)" % (fmt(min(cpu), 2), fmt(max(cpu), 2))),
                    fmt(max(rss) / 1024, 0) if rss else "-", max(conns) if conns else "-"))
        P("""
The paper: FastCGI first, mod_perl close behind, both rising linearly with
the clients; PHP two times and servlets four times slower than FastCGI (PHP
helped by its double number of database connections).
""")
    # ------------------------------------------------ BENCH3
    rates = sorted({int(m.group(1)) for r in mine for f in glob.glob(os.path.join(out, "raw", r[1] + "-b3-rate*.json"))
                    for m in [re.search(r"-b3-rate(\d+)\.json$", f)] if m})
    if rates:
        P("### BENCH3: errors at N new requests per second (open loop, each on its own connection)\n")
        P("R new connections per second, each with one request, %s s of arrivals; the run lasts until "
          "the last request ended. Each cell: errors (failed requests: connect, reset, timeout over 30 s "
          "...; plus other than 2xx responses, counted once) of the requests, the p99 latency (ms, from each request's intended "
          "send time), and how long the test took (s).\n" % params.split("B3_DUR=")[1].split()[0].rstrip("s"))
        P("| row | " + " | ".join("%d/s" % r for r in rates) + " |")
        P("|---|" + "---|" * len(rates))
        for r in mine:
            cells = []
            for rate in rates:
                d = load("%s-b3-rate%d" % (r[1], rate))
                if not d:
                    cells.append("-"); continue
                errs = verdict.errors(d)
                p99 = (d.get("latency_ms") or {}).get("p99")
                cells.append("%d of %d, p99 %s, %.1f s" % (errs, d["requests"] + d.get("not_sent", 0), fmt(p99, 0), d["duration_s"]))
            P("| %s | %s |" % (name(r[0]), " | ".join(cells)))
        more = []
        for r in mine:
            per_rep = []
            for rep in range(2, 100):
                ds = [load("%s-b3-rate%d%s" % (r[1], rate, rsfx(rep))) for rate in rates]
                if not any(ds):
                    break
                per_rep.append(sum(verdict.errors(d) for d in ds if d))
            if per_rep:
                more.append("%s %s" % (name(r[0]), ", ".join(str(x) for x in per_rep)))
        if more:
            P("\nErrors over all the rates in the later repeats (repeat 2 on): " + "; ".join(more) + ".")
        P("""
The paper (14, 16, 17, 20, 22 and 30 threads per second): no technology
produced a single error; only the test took longer as the rate rose.
""")
    # ------------------------------------------------ figures 7-8
    s7, s8, table = [], [], []
    for r in mine:
        d = load(r[1] + "-b4")
        if not d or not d.get("running"):
            continue
        run = d["running"]
        s7.append((name(r[0]), [(e["n"], e["mean_ms"]) for e in run], r[0].startswith("apache")))
        s8.append((name(r[0]), [(e["n"], e["stddev_ms"]) for e in run], r[0].startswith("apache")))
        table.append((r, run))
    if table:
        n = max(e["n"] for _, run in table for e in run)
        half = n // 2
        P("### Figures 7 and 8 (BENCH4): running mean and deviation per response\n")
        P("%d clients, one more every %s, each waiting 200 ms and making one request for the 50 KB page; "
          "after every response (`running_every = 1`) the mean and standard deviation of all responses "
          "so far. The paper shows the last 50 of 100 (the first ones are Apache forking children).\n" % (
              n, params.split("B4_EVERY=")[1].split()[0]))
        P("| row | mean at %d | mean at %d | deviation at %d | deviation at %d | deviation's largest step over the last half |" % (half, n, half, n))
        P("|---|---|---|---|---|---|")
        for r, run in table:
            by = {e["n"]: e for e in run}
            a, b = by.get(half) or run[len(run) // 2], by.get(n) or run[-1]
            late = [e["stddev_ms"] for e in run if e["n"] >= half and e["stddev_ms"] is not None]
            step = max((abs(y - x) for x, y in zip(late, late[1:])), default=None)
            P("| %s | %s | %s | %s | %s | %s |" % (name(r[0]), fmt(a["mean_ms"]), fmt(b["mean_ms"]),
                                                   fmt(a["stddev_ms"]), fmt(b["stddev_ms"]), fmt(step, 2)))
        c7 = chart("fig7-%s.svg" % db, "Figure 7 (BENCH4, %s): running mean" % dbname, "responses",
                   "mean response time so far (ms)", s7)
        c8 = chart("fig8-%s.svg" % db, "Figure 8 (BENCH4, %s): running deviation" % dbname, "responses",
                   "standard deviation so far (ms)", s8)
        if c7 and c8:
            P("\n![figure 7](fig7-%s.svg)\n\n![figure 8](fig8-%s.svg)\n\n(Apache dashed; every run in `compare-%s-b4.html`.)" % (db, db, db))
        P("""
The paper: FastCGI the fastest and most predictable, mean and deviation
rising almost linearly; mod_perl and especially PHP "lucky-unlucky" (some
clients served 3-5 times slower: sharp steps in the deviation), PHP's mean
climbing; servlets in the middle, degrading linearly.
""")

P("""## Reading it

The paper's server was a 733 MHz Pentium III with 384 MB serving over
100 Mbit/s from a second machine; here the servers and the databases share
the server CPU(s) and the load generator runs on the others (taskset, see
the parameters), over loopback, so every route is one to two orders of
magnitude faster and BENCH1's 3 s limit is reached only with many more
clients: hence the knee search instead of a 2 s ramp that would take hours
per route. What carries over is the order of the routes and the shape of
their curves; the paper's own CGI finding (a process and a database
connection per request, far behind everything else) is measured here
rather than left out. The front end restarts between benchmarks (see
RESTART in the parameters), so no backlog of one benchmark (CGI processes
above all) lands in the next.
Raw files: `raw/ROW-b1-thinkT.json`, `-b2`, `-b3-rateR`, `-b4` (stoa bench
JSON, text report beside each), and `compare-*.html` (the bench report's
charts, every row of a benchmark on the same plots).""")
notes = os.path.join(out, "notes.md")
if os.path.exists(notes):
    P("\n" + open(notes).read().rstrip("\n"))
