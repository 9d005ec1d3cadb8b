#!/usr/bin/env python3
"""stoa bench against h2load on the same Stoa, same settings, alternating.

For each case (h2c and h2 over TLS, each at -c C -m M) and round, runs
`stoa bench` (its JSON) and h2load (its text) one after the other, each
bounded by a request count (-n: h2load's connection times are recorded in
count mode only; with -D its warm-up logic restarts them after the
connections are up), and records requests/s, each generator's CPU time
(utime + stime of the child, from wait4) per successful request, and the
matching spans: h2load's "time for request", "time for connect" and "time
to 1st byte" (min, max, mean, sd) against stoa bench's `request`,
`connection` and `connection_first_byte` (n, mean, p50, p90, p99, max).
h2load has no percentiles: one more h2load run per case with --log-file
(a write per request, so not in the CPU figures) gives those of its time
for request.

Environment: STOA (server binary, default target/release/stoa), BENCH
(the generator: the `bench` example, run as is, or a `stoa` binary, run
as `stoa bench`; default the example when built, else STOA), H2LOAD, ROUNDS (3), CASES ("h2c:10:10 h2c:10:1 h2:10:10
h2:10:1": proto:connections:streams), N_M (requests for -m > 1), N_1
(requests for -m 1), PORT (first of two ports), OUT (a directory), CPU_SRV
and CPU_GEN (taskset CPU lists; empty: no pinning).

Writes OUT/results.json; `h2load-compare.py report OUT/results.json`
prints the tables (medians over the rounds).
"""

import json
import math
import os
import re
import statistics
import subprocess
import sys
import time

STOA = os.environ.get("STOA", "target/release/stoa")
_EXAMPLE = "target/release/examples/bench"
BENCH = os.environ.get("BENCH", _EXAMPLE if os.path.exists(_EXAMPLE) else STOA)
# The example binary (bench, bench-HASH) takes stoa bench's arguments
# directly; the server binary takes them after its `bench` subcommand.
BENCH_CMD = [BENCH] if os.path.basename(BENCH).startswith("bench") else [BENCH, "bench"]
H2LOAD = os.environ.get("H2LOAD", "h2load")
ROUNDS = int(os.environ.get("ROUNDS", "3"))
CASES = os.environ.get("CASES", "h2c:10:10 h2c:10:1 h2:10:10 h2:10:1").split()
N_M = int(os.environ.get("N_M", "200000"))
N_1 = int(os.environ.get("N_1", "60000"))
PORT = int(os.environ.get("PORT", "18980"))
OUT = os.environ.get("OUT", "/tmp/h2load-compare")
CPU_SRV = os.environ.get("CPU_SRV", "0")
CPU_GEN = os.environ.get("CPU_GEN", "1")


def pin(cpus, argv):
    return ["taskset", "-c", cpus] + argv if cpus else argv


def cpu_of(argv, timeout=300):
    """Runs argv; returns (exit status, stdout, stderr, CPU seconds): the
    children's utime + stime before and after (one child at a time; the
    servers are not reaped until the end, so they are not in it; taskset
    execs the generator, so its CPU is the generator's)."""
    before = os.times()
    p = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    out, err = p.communicate(timeout=timeout)
    rc = p.returncode
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    return rc, out, err, cpu


def wait_port(port, deadline=10.0):
    import socket

    end = time.time() + deadline
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"server on {port} did not start")


def start_servers(root, cert, key):
    common = ["serve", root, "--workers", "1", "--access-log", "off"]
    plain = subprocess.Popen(
        pin(CPU_SRV, [STOA] + common + ["--listen", f"127.0.0.1:{PORT}"]),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    tls = subprocess.Popen(
        pin(
            CPU_SRV,
            [STOA]
            + common
            + ["--listen", f"127.0.0.1:{PORT + 1}", "--tls-cert", cert, "--tls-key", key],
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_port(PORT)
    wait_port(PORT + 1)
    return plain, tls


def h2load_times(text):
    """h2load's summary: req/s, succeeded, and its three time rows in ms."""
    r = {}
    m = re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", text)
    r["rps"] = float(m.group(1)) if m else None
    m = re.search(r"requests: .* (\d+) succeeded", text)
    r["ok"] = int(m.group(1)) if m else 0
    unit = {"us": 0.001, "ms": 1.0, "s": 1000.0}

    def ms(v):
        m = re.match(r"([\d.]+)(us|ms|s)$", v)
        return float(m.group(1)) * unit[m.group(2)] if m else None

    for key, label in [
        ("request", "time for request"),
        ("connection", "time for connect"),
        ("connection_first_byte", "time to 1st byte"),
    ]:
        m = re.search(label + r":\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)", text)
        if m:
            r[key] = {
                "min": ms(m.group(1)),
                "max": ms(m.group(2)),
                "mean": ms(m.group(3)),
                "sd": ms(m.group(4)),
            }
    return r


def pct(xs, q):
    """The value of rank ceil(q% of n) (as stoa bench's percentiles)."""
    xs = sorted(xs)
    if not xs:
        return None
    rank = min(len(xs), max(1, math.ceil(q / 100.0 * len(xs))))
    return xs[rank - 1]


def main():
    os.makedirs(OUT, exist_ok=True)
    root = os.environ.get("ROOT", "/tmp/benchfix/www")
    cert = os.environ.get("CERT", "/tmp/benchfix/tls/cert.pem")
    key = os.environ.get("KEY", "/tmp/benchfix/tls/key.pem")
    plain, tls = start_servers(root, cert, key)
    results = {"cases": {}, "load_before": open("/proc/loadavg").read().split()[:3]}
    try:
        for case in CASES:
            proto, c, m = case.split(":")
            n = N_M if int(m) > 1 else N_1
            if proto == "h2c":
                url = f"http://127.0.0.1:{PORT}/page.html"
                extra = []
            else:
                url = f"https://127.0.0.1:{PORT + 1}/page.html"
                extra = ["--insecure"]
            rounds = []
            for i in range(ROUNDS):
                js = os.path.join(OUT, f"{proto}-{c}-{m}-{i}.json")
                sb = BENCH_CMD + ["-q", "--threads", "1", "-n", str(n), "-c", c, "--http2",
                      "--max-concurrent-streams", m, "--json", js] + extra + [url]
                rc, out, err, cpu = cpu_of(pin(CPU_GEN, sb))
                if rc != 0:
                    sys.exit(f"stoa bench failed: {err}")
                v = json.load(open(js))
                ok = v["successful"]
                s = {
                    "rps": v["requests_per_second"],
                    "ok": ok,
                    "failed": v["failed"],
                    "cpu_us_per_req": cpu / ok * 1e6 if ok else None,
                    "phases": v["phases_ms"],
                }
                hl = [H2LOAD, "-t1", "-n", str(n), "-c", c, "-m", m, url]
                rc, out, err, cpu = cpu_of(pin(CPU_GEN, hl))
                if rc != 0:
                    sys.exit(f"h2load failed: {out}{err}")
                h = h2load_times(out)
                h["cpu_us_per_req"] = cpu / h["ok"] * 1e6 if h["ok"] else None
                h["text"] = out
                rounds.append({"stoa_bench": s, "h2load": h})
                print(case, i, "stoa bench", round(s["rps"]), "h2load", h["rps"], flush=True)
            # h2load's percentiles of time for request, from its log.
            log = os.path.join(OUT, f"{proto}-{c}-{m}-h2load.log")
            hl = [H2LOAD, "-t1", "-n", str(n), "-c", c, "-m", m, "--log-file", log, url]
            rc, out, err, _ = cpu_of(pin(CPU_GEN, hl))
            xs = []
            for line in open(log):
                f = line.split()
                if len(f) == 3 and f[1] != "-1":
                    xs.append(int(f[2]) / 1000.0)
            logged = {
                "n": len(xs),
                "mean": statistics.fmean(xs) if xs else None,
                "p50": pct(xs, 50),
                "p90": pct(xs, 90),
                "p99": pct(xs, 99),
                "max": max(xs) if xs else None,
                "summary": h2load_times(out),
            }
            os.remove(log)
            results["cases"][case] = {"n": n, "rounds": rounds, "h2load_logged": logged}
    finally:
        for p in (plain, tls):
            p.terminate()
            p.wait()
    results["load_after"] = open("/proc/loadavg").read().split()[:3]
    with open(os.path.join(OUT, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    print("load before", results["load_before"], "after", results["load_after"])


def report(path):
    """Markdown tables from a results.json: medians over the rounds."""
    r = json.load(open(path))
    med = statistics.median

    def ratio(a, b):
        return f"{a / b:.2f}" if a and b else "-"

    print("| case | h2load req/s | stoa bench req/s | ratio | h2load CPU µs/req | stoa bench CPU µs/req | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for case, c in r["cases"].items():
        h = med(x["h2load"]["rps"] for x in c["rounds"])
        s = med(x["stoa_bench"]["rps"] for x in c["rounds"])
        hc = med(x["h2load"]["cpu_us_per_req"] for x in c["rounds"])
        sc = med(x["stoa_bench"]["cpu_us_per_req"] for x in c["rounds"])
        print(f"| {case} | {h:,.0f} | {s:,.0f} | {ratio(s, h)} | {hc:.2f} | {sc:.2f} | {ratio(sc, hc)} |")
    print()
    print("| case | span | h2load mean ms | stoa bench mean ms | ratio | h2load p50 / p90 / p99 (logged run) | stoa bench p50 / p90 / p99 |")
    print("|---|---|---:|---:|---:|---|---|")
    for case, c in r["cases"].items():
        for span in ["request", "connection", "connection_first_byte"]:
            hm = med(x["h2load"][span]["mean"] for x in c["rounds"])
            sm = med(x["stoa_bench"]["phases"][span]["mean"] for x in c["rounds"])
            sp = [
                med(x["stoa_bench"]["phases"][span][q] for x in c["rounds"])
                for q in ["p50", "p90", "p99"]
            ]
            if span == "request":
                lg = c["h2load_logged"]
                hp = f"{lg['p50']:.3f} / {lg['p90']:.3f} / {lg['p99']:.3f}"
            else:
                hp = "- (h2load: none)"
            print(
                f"| {case} | {span} | {hm:.3f} | {sm:.3f} | {ratio(sm, hm)} | {hp} | "
                + " / ".join(f"{v:.3f}" for v in sp)
                + " |"
            )
    print()
    print("load average before", r["load_before"], "after", r["load_after"])


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "report":
        report(sys.argv[2])
    else:
        main()
