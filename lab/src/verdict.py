#!/usr/bin/env python3
"""The verdict table that opens every lab summary, and the statistics behind it.

    python3 lab/src/verdict.py RESULTS_DIR          the table + provenance (markdown)
    python3 lab/src/verdict.py --check RESULTS_DIR  validate verdicts.json (exit 1 if bad)
    python3 lab/src/verdict.py --stat RESULTS_DIR LABEL
                                                    "median min max n short|full" of
                                                    LABEL's values in raw/measures.jsonl

RESULTS_DIR/verdicts.json is a list of claims:

    {"claim": "quoted claim", "where": "p. 4, fig. 5", "paper": "1.9x",
     "measured": {"median": 2.0, "min": 1.8, "max": 2.1, "n": 5, "unit": "x"},
     "verdict": "reproduced" | "contradicted" | "cannot be tested here",
     "why": "one line"}

("measured" is null for a claim that cannot be tested here.) RESULTS_DIR/raw/meta.json,
written by lab/lib.sh, gives the provenance line under the table: commit, binary, quick or
full, repeats, CPUs, load average before and after.

As a module (experiments' summary scripts: sys.path.insert(0, "lab/src")):
measures(out) reads raw/measures.jsonl into {label: {rep: value}}; stat(values, unit) is the
"measured" object; ratio(a, b) pairs two labels' values repeat by repeat (a[i] / b[i]);
judge(measured, low, high) gives the verdict of a claim that the true figure lies in
[low, high]; write(out, claims) writes verdicts.json after checking it; errors(d) counts the
requests of a `stoa bench` JSON that did not get a good answer.
"""

import json
import os
import statistics
import sys

VERDICTS = ("reproduced", "contradicted", "cannot be tested here")
FIELDS = ("claim", "where", "paper", "measured", "verdict", "why")


# ---------------------------------------------------------------- statistics

def measures(out):
    """raw/measures.jsonl -> {label: {rep: value}} (the last value of a repeat wins)."""
    got = {}
    path = os.path.join(out, "raw", "measures.jsonl")
    if not os.path.exists(path):
        return got
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            d = json.loads(line)
            if d.get("value") is None:
                continue
            got.setdefault(d["label"], {})[d.get("rep")] = float(d["value"])
    return got


def units(out):
    """raw/measures.jsonl -> {label: unit}."""
    got = {}
    path = os.path.join(out, "raw", "measures.jsonl")
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if line.strip():
                    d = json.loads(line)
                    got[d["label"]] = d.get("unit") or ""
    return got


def stat(values, unit=""):
    """The "measured" object of a verdict: median, min, max, n, unit (None if no values)."""
    vals = [float(v) for v in (values.values() if isinstance(values, dict) else values) if v is not None]
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals), "unit": unit}


def ratio(a, b, unit="x"):
    """a[rep] / b[rep] for every repeat both have (a and b: {rep: value}), as a "measured".

    Pairing by repeat keeps each ratio within one round, when the servers ran one after the
    other: a slow round on a shared box moves both."""
    vals = [a[r] / b[r] for r in a if r in b and b[r]]
    return stat(vals, unit)


def errors(d):
    """Requests of a `stoa bench` JSON `d` that got no good answer: failed (refused, reset,
    timed out ...), answered other than 2xx, or never sent. A 5xx page is also a length
    failure (as ab, a response whose length differs from the first one's is failed): it
    counts once, and only length failures beyond the non-2xx responses count as their own."""
    lm = d.get("errors", {}).get("length_mismatch", 0)
    n2 = d.get("non_2xx", 0)
    return d["failed"] - lm + max(0, lm - n2) + n2 + d.get("not_sent", 0)


def judge(measured, low=None, high=None):
    """Verdict of a claim "the figure lies in [low, high]" (either bound may be None).

    Reproduced when the median lies inside, contradicted when it lies outside; the reason
    says whether every repeat agreed, so a verdict that rests on the median alone shows it."""
    if not measured:
        return "cannot be tested here", "no measurement"

    def inside(x):
        return (low is None or x >= low) and (high is None or x <= high)

    def bounds():
        if low is not None and high is not None:
            return "in [%s, %s]" % (fmt(low), fmt(high))
        if low is not None:
            return ">= %s" % fmt(low)
        return "<= %s" % fmt(high)

    m = measured
    all_in = inside(m["min"]) and inside(m["max"])
    none_in = not inside(m["min"]) and not inside(m["max"]) and not (
        low is not None and high is not None and m["min"] < low and m["max"] > high)
    if inside(m["median"]):
        why = "median %s %s" % (fmt(m["median"]), bounds())
        why += "; every repeat too" if all_in else "; but the spread %s-%s crosses the bound" % (fmt(m["min"]), fmt(m["max"]))
        return "reproduced", why
    why = "median %s, not %s" % (fmt(m["median"]), bounds())
    why += "; no repeat was" if none_in else "; some repeats were (spread %s-%s)" % (fmt(m["min"]), fmt(m["max"]))
    return "contradicted", why


# ---------------------------------------------------------------- checking and rendering

def check(claims):
    """The problems of a verdicts.json list (empty when it is well formed)."""
    errs = []
    if not isinstance(claims, list):
        return ["verdicts.json must hold a list of claims"]
    for i, c in enumerate(claims):
        where = "claim %d" % (i + 1)
        if not isinstance(c, dict):
            errs.append("%s: not an object" % where)
            continue
        for k in FIELDS:
            if k not in c:
                errs.append("%s: no %r" % (where, k))
        if c.get("verdict") not in VERDICTS:
            errs.append("%s: verdict %r is not one of %s" % (where, c.get("verdict"), ", ".join(VERDICTS)))
        m = c.get("measured")
        if m is None:
            if c.get("verdict") != "cannot be tested here":
                errs.append("%s: no measurement, so the verdict can only be 'cannot be tested here'" % where)
        elif not isinstance(m, dict) or any(k not in m for k in ("median", "min", "max", "n")):
            errs.append("%s: measured needs median, min, max and n" % where)
        elif not (m["min"] <= m["median"] <= m["max"]):
            errs.append("%s: measured's min <= median <= max does not hold" % where)
        if "\n" in str(c.get("why", "")):
            errs.append("%s: why must be one line" % where)
    return errs


def write(out, claims):
    """verdicts.json in OUT, after check(); raises ValueError listing the problems."""
    errs = check(claims)
    if errs:
        raise ValueError("; ".join(errs))
    with open(os.path.join(out, "verdicts.json"), "w") as f:
        json.dump(claims, f, indent=1)
        f.write("\n")


def fmt(x):
    """A number as a reader wants it: 3 significant figures, thousands apart."""
    if x is None:
        return "-"
    x = float(x)
    if x != x:
        return "-"
    a = abs(x)
    if a >= 1000:
        return "{:,.0f}".format(x)
    if a >= 100:
        return "%.0f" % x
    if a >= 10:
        return "%.1f" % x
    if a >= 0.995:
        return "%.2f" % x
    return "%.3g" % x


def measured_text(m):
    if not m:
        return "-"
    unit = m.get("unit") or ""
    sep = "" if unit in ("x", "%") else " "
    u = (sep + unit) if unit else ""
    if m["n"] == 1 or m["min"] == m["max"]:
        return "%s%s (n=%d)" % (fmt(m["median"]), u, m["n"])
    return "%s%s (%s-%s, n=%d)" % (fmt(m["median"]), u, fmt(m["min"]), fmt(m["max"]), m["n"])


def short_text(m):
    """median (min-max) without unit or n: for tables whose header says both."""
    if m["n"] == 1 or m["min"] == m["max"]:
        return fmt(m["median"])
    return "%s (%s-%s)" % (fmt(m["median"]), fmt(m["min"]), fmt(m["max"]))


def cell(s):
    return str(s).replace("|", "\\|").replace("\n", " ")


MARK = {"reproduced": "**reproduced**", "contradicted": "**contradicted**", "cannot be tested here": "cannot be tested here"}


def table(claims):
    lines = ["| claim | where | paper | measured: median (min-max, n) | verdict | why |",
             "|---|---|---|---|---|---|"]
    for c in claims:
        lines.append("| %s | %s | %s | %s | %s | %s |" % (
            cell(c["claim"]), cell(c["where"]), cell(c["paper"]), cell(measured_text(c.get("measured"))),
            MARK.get(c["verdict"], cell(c["verdict"])), cell(c["why"])))
    return "\n".join(lines)


def provenance(meta):
    """One paragraph from raw/meta.json: which build, how it ran, how loaded the box was."""
    if not meta:
        return "(no raw/meta.json: provenance unknown)"
    cpus = meta.get("cpus", {})
    parts = [
        "%s run, %s of %s s runs" % ("Quick (`--quick`)" if meta.get("quick") else "Full",
                                     "1 repeat" if meta.get("repeats") == 1 else "%s repeats" % meta.get("repeats", "?"),
                                     meta.get("run_secs", "?")) + (
            " (this run ran repeats %s of rows run before: their times are in the rows table)"
            % meta["notes"]["repeats_here"] if (meta.get("notes") or {}).get("repeats_here") else ""),
        "started %s, ended %s" % (meta.get("started", "?"), meta.get("ended", "?")),
        "commit %s%s" % (str(meta.get("commit", "?"))[:10], " (with uncommitted changes)" if meta.get("dirty") else ""),
        "stoa sha256 %s" % str(meta.get("stoa_sha256", "?"))[:12],
        "%s" % meta.get("machine", "?"),
        "servers on CPU %s, load generators on CPU %s%s" % (
            cpus.get("servers", "?"), cpus.get("load", "?"), "" if cpus.get("separate", True) else " (the same CPU: one-CPU machine)"),
        "load average %s before, %s after" % (meta.get("loadavg_before", "?"), meta.get("loadavg_after", "?")),
    ]
    runs = meta.get("runs", [])
    if runs:
        la = [float(r["loadavg_before"].split()[0]) for r in runs if r.get("loadavg_before")]
        if la:
            parts.append("1-minute load average before the %d measured runs %s-%s" % (len(runs), fmt(min(la)), fmt(max(la))))
    return "; ".join(parts) + " (raw/meta.json)."


def render(out):
    with open(os.path.join(out, "verdicts.json")) as f:
        claims = json.load(f)
    errs = check(claims)
    if errs:
        raise ValueError("%s/verdicts.json: %s" % (out, "; ".join(errs)))
    meta = None
    mp = os.path.join(out, "raw", "meta.json")
    if os.path.exists(mp):
        with open(mp) as f:
            meta = json.load(f)
    counts = {v: sum(1 for c in claims if c["verdict"] == v) for v in VERDICTS}
    head = "## Verdicts\n\n%d claims: %d reproduced, %d contradicted, %d cannot be tested here.\n\n" % (
        len(claims), counts["reproduced"], counts["contradicted"], counts["cannot be tested here"])
    note = ""
    peak = max([float(r["loadavg_before"].split()[0]) for r in (meta or {}).get("runs", []) if r.get("loadavg_before")] or
               [float(meta["loadavg_before"].split()[0]) if meta and meta.get("loadavg_before") else 0.0])
    cores = (meta or {}).get("nproc") or 1
    if meta and meta.get("quick"):
        note = ("\n\n*These figures come from a `--quick` run (%s repeats, short runs)%s: "
                "they show the experiment works, not what holds.*" % (
                    meta.get("repeats", "?"), " on a loaded box" if peak >= 1 else ""))
    elif other_work(meta) is not None:
        other = other_work(meta)
        if other > OTHER_WORK_LOADED:
            note = ("\n\n*Measured on a loaded box: other work than the servers and the load took up to %s "
                    "of the %s cores during some runs, so the spreads are wide and a verdict near its bound "
                    "may turn on a quiet box.*" % (fmt(other), cores))
        elif peak > cores:
            note = ("\n\n*The 1-minute load average (up to %s on %s cores) counts the experiment's own "
                    "processes; other work took at most %s of a core during the measured runs.*"
                    % (fmt(peak), cores, fmt(other)))
    elif peak > cores:
        note = ("\n\n*Measured on a loaded box: the 1-minute load average reached %s on %s cores before "
                "some runs (other work shared the machine), so the spreads are wide and a verdict near its "
                "bound may turn on a quiet box.*" % (fmt(peak), cores))
    return head + table(claims) + "\n\n" + provenance(meta) + note + "\n"


# Other work than the measured processes, in cores, above which a run's
# machine counts as loaded (the kernel's share of loopback traffic that no
# process is charged for stays well below it).
OTHER_WORK_LOADED = 0.5


def other_work(meta):
    """The most cores that work other than the servers and the load took
    during a measured run (the machine's busy CPU time less theirs, over
    the run's wall time); None when the runs did not record the machine's."""
    shares = []
    for r in (meta or {}).get("runs", []):
        if r.get("machine_cpu_s") is None or not r.get("secs"):
            continue
        own = (r.get("load_cpu_s") or 0) + sum((r.get("server_cpu_s") or {}).values())
        shares.append(max(0.0, r["machine_cpu_s"] - own) / r["secs"])
    return max(shares) if shares else None


def main(argv):
    if len(argv) == 3 and argv[0] == "--stat":
        vals = measures(argv[1]).get(argv[2], {})
        m = stat(vals, units(argv[1]).get(argv[2], ""))
        if not m:
            print("no values for %s" % argv[2], file=sys.stderr)
            return 1
        print("%r %r %r %d %s|%s" % (m["median"], m["min"], m["max"], m["n"], short_text(m), measured_text(m)))
        return 0
    if len(argv) == 2 and argv[0] == "--check":
        with open(os.path.join(argv[1], "verdicts.json")) as f:
            errs = check(json.load(f))
        for e in errs:
            print(e, file=sys.stderr)
        return 1 if errs else 0
    if len(argv) == 1 and not argv[0].startswith("-"):
        try:
            sys.stdout.write(render(argv[0]))
        except (OSError, ValueError) as e:
            print("verdict.py: %s" % e, file=sys.stderr)
            return 1
        return 0
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
