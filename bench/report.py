#!/usr/bin/env python3
"""report.py META RUNS_TSV RSS_TSV - Markdown report for bench/static.sh (written to stdout).

META: key=value lines (date, command, machine, versions, params). RUNS_TSV, RSS_TSV: as written by
static.sh. With several rounds (REPS) the tables show medians. Ratios compare every `stoa*` server
with every other server (nginx*, lighttpd, floor): req/s ratio = stoa / peer (> 1: Stoa faster),
CPU/request ratio = stoa / peer (< 1: Stoa cheaper). A case is (file, tool, connections); the
connection table shows CPU per request against the number of keep-alive connections (CONNS_LIST)
with each count's ratio to the smallest.
"""
import csv
import math
import statistics
import sys

TOOL_LABEL = {"wrk": "wrk -t1 (keep-alive)", "wrkclose": "wrk -t1, Connection: close",
              "ab": "ab (no keep-alive)", "abk": "ab -k"}


def load_label(tool, conns):
    return f"{TOOL_LABEL.get(tool, tool)} -c{conns}"


def num(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, digits=0):
    if x is None:
        return "-"
    return f"{x:,.{digits}f}"


def file_label(name, size):
    size = int(size)
    if size >= 1 << 20:
        h = f"{size / (1 << 20):g} MiB"
    elif size >= 10000:
        h = f"{size / 1024:.1f} KiB"
    else:
        h = f"{size} B"
    return f"{name} ({h})"


def main():
    meta = dict(line.rstrip("\n").split("=", 1) for line in open(sys.argv[1]) if "=" in line)
    runs = list(csv.DictReader(open(sys.argv[2]), delimiter="\t"))
    rss = list(csv.DictReader(open(sys.argv[3]), delimiter="\t"))

    servers, cases = [], []
    for r in runs:
        if r["server"] not in servers:
            servers.append(r["server"])
        r.setdefault("conns", None)  # runs.tsv from before the conns column
        c = (r["file"], r["size"], r["tool"], r["conns"] or "?")
        if c not in cases:
            cases.append(c)
    reps = max((int(r["rep"]) for r in runs), default=1)
    other_max = float(meta.get("other_max", "inf"))
    cell = {}
    for c in cases:
        for s in servers:
            rs = [r for r in runs if (r["file"], r["size"], r["tool"], r["conns"] or "?") == c and r["server"] == s]
            if not rs:
                continue
            bad = [r["status"] for r in rs if r["status"] != "ok"]
            cell[c, s] = {
                "rps": med(num(r["rps"]) for r in rs if r["status"] == "ok"),
                "us": med(num(r["us_per_req"]) for r in rs if r["status"] == "ok"),
                "p50": med(num(r["p50_ms"]) for r in rs), "p99": med(num(r["p99_ms"]) for r in rs),
                "lg": med(num(r["loadgen_cpu"]) for r in rs), "busy": max(int(r["busy"]) for r in rs),
                "other": max((num(r["other"]) for r in rs if num(r["other"]) is not None), default=None),
                # runs under 1 s are never flagged: 10 ms clock ticks make "other" too coarse there
                "other_1s": max((num(r["other"]) for r in rs if num(r["other"]) is not None
                                 and (num(r["secs"]) or 0) >= 1), default=None),
                "n": sum(int(r["requests"] or 0) for r in rs),
                "non2xx": sum(int(num(r["non2xx"]) or 0) for r in rs),
                "err": sum(int(num(r["errors"]) or 0) for r in rs),
                "ka": "/".join(r["ka"] for r in rs),
                "spread": (min(num(r["rps"]) or 0 for r in rs), max(num(r["rps"]) or 0 for r in rs)),
                "status": "; ".join(dict.fromkeys(bad)) if bad else "ok",
            }
            x = cell[c, s]
            if x["other_1s"] is not None and x["other_1s"] > other_max:
                x["disturbed"] = True
                x["status"] += f"; DISTURBED (other {x['other']:.0f} % > {other_max:g})"

    out = []
    p = out.append
    p(f"# Static files: Stoa vs nginx, lighttpd and the floor ({meta.get('date', '?')})")
    p("")
    p(f"- command: `{meta.get('command', '?')}`")
    p(f"- machine: {meta.get('machine', '?')}; load generator and servers share the cores, loopback only")
    p(f"- versions: {meta.get('versions', '?')}")
    p(f"- load: {meta.get('params', '?')}")
    if meta.get("loadavg"):
        p(f"- load average (1, 5, 15 min): {meta['loadavg']}")
    p("- CPU/req = server utime+stime (all its processes and threads, /proc/PID/stat) during the run"
      " / requests completed, in microseconds. loadgen = wrk/ab CPU, % of one core. busy = whole box"
      " busy % in the second before the run (runs wait up to QUIET_MAX s for < QUIET_PCT %). other = CPU used during"
      " the run by everything but the server and the load generator (% of one core, from /proc/stat;"
      " 2-40 % on a quiet box: kernel threads carrying the loopback traffic): a high value means the run was disturbed (runs above OTHER_MAX are"
      " made again, up to RETRIES times; the last attempt is shown; runs under 1 s, where 10 ms clock ticks make it coarse, are not retried)."
      " ka = ab keep-alive requests.")
    if reps > 1:
        p(f"- {reps} rounds: req/s, CPU/req, latencies are medians; requests, errors are sums.")
    p("")
    p("## Throughput and CPU per request")
    p("")
    p("| file | load | server | req/s | CPU µs/req | requests | non-2xx | errors | ka | p50 ms | p99 ms | loadgen % | busy % | other % | status |")
    p("|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|")
    for c in cases:
        for s in servers:
            x = cell.get((c, s))
            if not x:
                continue
            rps = fmt(x["rps"])
            if reps > 1 and x["rps"] is not None:
                rps += f" ({fmt(x['spread'][0])}–{fmt(x['spread'][1])})"
            p(f"| {file_label(c[0], c[1])} | {load_label(c[2], c[3])} | {s} | {rps} | {fmt(x['us'], 1)} | {x['n']:,}"
              f" | {x['non2xx']} | {x['err']} | {x['ka']} | {fmt(x['p50'], 2)} | {fmt(x['p99'], 2)}"
              f" | {fmt(x['lg'])} | {x['busy']} | {fmt(x['other'])} | {x['status']} |")
    p("")

    p("## Side by side")
    p("")
    p("Per server: CPU µs per request · req/s · p99 ms (medians; `-`: no clean run).")
    p("")
    p("| file | load |" + "".join(f" {s} |" for s in servers))
    p("|---|---|" + "---|" * len(servers))
    for c in cases:
        row = f"| {file_label(c[0], c[1])} | {load_label(c[2], c[3])} |"
        for s in servers:
            x = cell.get((c, s))
            row += (f" {fmt(x['us'], 1)} · {fmt(x['rps'])} · {fmt(x['p99'], 2)}"
                    f"{' (disturbed)' if x.get('disturbed') else ''} |" if x else " |")
        p(row)
    p("")

    # the same file and tool at several connection counts (CONNS_LIST)
    groups = {}
    for c in cases:
        groups.setdefault(c[:3], []).append(c)
    multi = {g: sorted(cs, key=lambda c: int(c[3]) if c[3].isdigit() else 0)
             for g, cs in groups.items() if len(cs) > 1}
    if multi:
        p("## CPU per request against the number of connections")
        p("")
        p("CPU µs per request (p99 ms) at each number of keep-alive connections; × N = CPU per request"
          " at N connections / at the fewest (the issue's target: 5,000 within 1.15 × of 60).")
        p("")
        for g, cs in multi.items():
            p(f"{file_label(g[0], g[1])}, {TOOL_LABEL.get(g[2], g[2])}:")
            p("")
            base = cs[0][3]
            p("| server |" + "".join(f" -c{c[3]} |" for c in cs) + "".join(f" × {c[3]} |" for c in cs[1:]))
            p("|---|" + "--:|" * (2 * len(cs) - 1))
            for s in servers:
                row = f"| {s} |"
                for c in cs:
                    x = cell.get((c, s), {})
                    row += f" {fmt(x.get('us'), 1)} ({fmt(x.get('p99'), 2)}) |"
                b = cell.get((cs[0], s), {}).get("us")
                for c in cs[1:]:
                    a = cell.get((c, s), {}).get("us")
                    row += f" {a / b:.2f} |" if a and b else " - |"
                p(row)
            p("")
            # wrk opens all N connections inside the run, so with few requests per connection a
            # whole-run row is mostly connection set-up (accept, first read), not keep-alive serving;
            # from window_conns on, rows are counted in a window after the set-up (lib.sh window_load)
            wc = int(meta.get("window_conns", "0") or 0)
            per = []
            for c in cs:
                ns = [cell[c, s]["n"] / reps for s in servers if (c, s) in cell and cell[c, s]["n"]]
                per.append(f"-c{c[3]} {min(ns) / int(c[3]):,.1f}" if ns and c[3].isdigit() else f"-c{c[3]} -")
            windowed = [c[3] for c in cs if wc and c[3].isdigit() and int(c[3]) >= wc]
            note = (f" Rows -c{', -c'.join(windowed)}: steady state, counted in a window opened 1 s after all"
                    " the connections were established (set-up excluded); the others over the whole run."
                    if windowed else "")
            p(f"(× relative to -c{base}. Requests per connection counted, the fewest of the servers:"
              f" {'; '.join(per)}.{note} p99 is over the whole wrk run.)")
            p("")

    stoas = [s for s in servers if s.startswith("stoa")]
    peers = [s for s in servers if not s.startswith("stoa")]
    p("## Stoa relative to each peer")
    p("")
    if not stoas or not peers:
        p("(needs a `stoa*` server and at least one peer in SERVERS)")
    else:
        p("req/s × = Stoa req/s / peer req/s (> 1: Stoa faster); CPU × = Stoa CPU per request / peer's"
          " (< 1: Stoa cheaper). Last rows: geometric means over the cases. Runs marked DISTURBED"
          " (other processes took more than OTHER_MAX % of a core during them) are left out.")
        p("")
        head = "| file | load | stoa |" + "".join(f" req/s × {q} | CPU × {q} |" for q in peers)
        p(head)
        p("|---|---|---|" + "--:|--:|" * len(peers))
        logs = {(s, q, k): [] for s in stoas for q in peers for k in ("rps", "us")}
        for c in cases:
            for s in stoas:
                row = f"| {file_label(c[0], c[1])} | {load_label(c[2], c[3])} | {s} |"
                for q in peers:
                    for k in ("rps", "us"):
                        a, b = cell.get((c, s), {}).get(k), cell.get((c, q), {}).get(k)
                        if cell.get((c, s), {}).get("disturbed") or cell.get((c, q), {}).get("disturbed"):
                            row += " (disturbed) |"
                        elif a and b:
                            logs[s, q, k].append(math.log(a / b))
                            row += f" {a / b:.2f} |"
                        else:
                            row += " - |"
                p(row)
        for s in stoas:
            row = f"| **all cases** | geometric mean | {s} |"
            for q in peers:
                for k in ("rps", "us"):
                    v = logs[s, q, k]
                    row += f" **{math.exp(sum(v) / len(v)):.2f}** |" if v else " - |"
            p(row)
    p("")

    if rss:
        p("## Memory (RSS)")
        p("")
        p("VmRSS summed over the server's processes, MiB: idle right after start; idle after all loads;"
          " while holding the idle keep-alive connections (each sent one GET and read the response);"
          " after the client closed them. PSS counts pages shared between nginx's processes once."
          " per conn = (held - idle after loads) / connections. setup CPU = server CPU while the"
          " connections were opened.")
        p("")
        p("| server | idle | after loads | holding conns | PSS holding | per conn KiB | after close | setup CPU ms | client: set up | client: at close |")
        p("|---|--:|--:|--:|--:|--:|--:|--:|---|---|")
        for r in rss:
            mib = lambda k: fmt(num(r[k]) / 1024, 1) if num(r[k]) is not None else "-"  # noqa: E731
            per = "-"
            ok = dict(kv.split("=", 1) for kv in r["ready"].split() if "=" in kv).get("ok")
            if num(r["held_kb"]) is not None and num(r["after_kb"]) is not None and ok and int(ok) > 0:
                per = f"{(num(r['held_kb']) - num(r['after_kb'])) / int(ok):.1f}"
            p(f"| {r['server']} | {mib('idle_kb')} | {mib('after_kb')} | {mib('held_kb')} | {mib('held_pss_kb')}"
              f" | {per} | {mib('closed_kb')} | {r['hold_cpu_ms']} | {r['ready']} | {r['done']} |")
        p("")
    if meta.get("failed") == "1":
        p("**Some server failed a check, a run or the connection test: see the status columns.**")
        p("")
    print("\n".join(out))


if __name__ == "__main__":
    main()
