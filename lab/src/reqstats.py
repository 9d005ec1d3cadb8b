#!/usr/bin/env python3
"""Statistics of one stoa bench per-request log (--log CSV), as JSON.

    python3 lab/src/reqstats.py RUN.csv > stats.json

n, median, mean, stddev, p99, max (ms) of the complete responses' latencies;
modes: the peaks of their histogram in log-spaced bins (BINS_PER_DECADE),
each holding at least MIN_SHARE of the requests and separated from the
next peak by a valley below half the smaller one's height (the "uniform
bands" of apache-vs-typical-c-server.txt show as several peaks, one queue
as one); distinct_pct: the share of requests whose (start, latency) pair is
unique in the run (a client that stamps requests in batches gives few).
"""

import csv
import json
import math
import statistics
import sys

BINS_PER_DECADE = 10
MIN_SHARE = 0.02


def modes(lat):
    """Peaks of the log-binned histogram of lat (ms, > 0)."""
    pos = [x for x in lat if x > 0]
    if not pos:
        return 0
    lo = math.floor(math.log10(min(pos)) * BINS_PER_DECADE)
    hi = math.floor(math.log10(max(pos)) * BINS_PER_DECADE)
    h = [0] * (hi - lo + 1)
    for x in pos:
        h[math.floor(math.log10(x) * BINS_PER_DECADE) - lo] += 1
    need = MIN_SHARE * len(pos)
    peaks = []
    for i, c in enumerate(h):
        left = h[i - 1] if i > 0 else 0
        right = h[i + 1] if i + 1 < len(h) else 0
        if c >= need and c >= left and c > right:
            peaks.append(i)
    # merge peaks without a deep enough valley between them
    kept = []
    for p in peaks:
        if kept:
            q = kept[-1]
            valley = min(h[q:p + 1])
            if valley >= 0.5 * min(h[q], h[p]):
                if h[p] > h[q]:
                    kept[-1] = p
                continue
        kept.append(p)
    return len(kept)


def main(path):
    lat, pairs = [], []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if not row.get("latency_ms") or not str(row.get("status", "")).startswith("2"):
                continue
            x = float(row["latency_ms"])
            lat.append(x)
            pairs.append((row.get("start_s"), row["latency_ms"]))
    if not lat:
        print("reqstats: no complete responses in %s" % path, file=sys.stderr)
        return 1
    lat_sorted = sorted(lat)
    counts = {}
    for p in pairs:
        counts[p] = counts.get(p, 0) + 1
    unique = sum(1 for p in pairs if counts[p] == 1)
    out = {
        "n": len(lat),
        "median": statistics.median(lat_sorted),
        "mean": statistics.fmean(lat),
        "stddev": statistics.pstdev(lat),
        "p99": lat_sorted[min(len(lat_sorted) - 1, math.ceil(0.99 * len(lat_sorted)) - 1)],
        "max": lat_sorted[-1],
        "modes": modes(lat),
        "distinct_pct": 100.0 * unique / len(pairs),
    }
    json.dump(out, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
