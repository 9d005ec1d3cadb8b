"""A stand-in for lab/src/verdict.py (measures, stat, ratio, judge, write and
the table), used only while that file is not in this tree."""
import json, os, statistics, sys


def measures(out):
    got = {}
    p = os.path.join(out, "raw", "measures.jsonl")
    for line in (open(p) if os.path.exists(p) else []):
        d = json.loads(line)
        if d.get("value") is not None:
            got.setdefault(d["label"], {})[d.get("rep")] = float(d["value"])
    return got


def stat(values, unit=""):
    v = [float(x) for x in (values.values() if isinstance(values, dict) else values) if x is not None]
    return {"median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v), "unit": unit} if v else None


def ratio(a, b, unit="x"):
    return stat([a[r] / b[r] for r in a if r in b and b[r]], unit)


def judge(m, low=None, high=None):
    if not m:
        return "cannot be tested here", "no measurement"
    ok = (low is None or m["median"] >= low) and (high is None or m["median"] <= high)
    return ("reproduced" if ok else "contradicted"), "median %.3g, bounds %s-%s" % (m["median"], low, high)


def write(out, claims):
    with open(os.path.join(out, "verdicts.json"), "w") as f:
        json.dump(claims, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    claims = json.load(open(os.path.join(sys.argv[1], "verdicts.json")))
    print("| claim | where | paper | measured | verdict | why |\n|---|---|---|---|---|---|")
    for c in claims:
        m = c["measured"]
        ms = "-" if not m else "%.3g %s (%.3g-%.3g, n=%d)" % (m["median"], m.get("unit", ""), m["min"], m["max"], m["n"])
        print("| %s | %s | %s | %s | **%s** | %s |" % (c["claim"], c["where"], c["paper"], ms, c["verdict"], c["why"]))
