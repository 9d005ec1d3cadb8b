#!/usr/bin/env python3
"""dynamic-verdicts.py OUT ROWS.tsv QUICK: dynamic-routes' verdicts.json.

The paper's claims are about Apache 1.3 with each technology, so the
verdicts read the Apache rows (prefork, as 1.3 was), on PostgreSQL (the
paper's PostgreSQL 7.1) where those rows ran their benchmarks, else on
SQLite. FastCGI is the paper's Perl FastCGI (CGI::Fast, its Figure 1).
A row runs BENCH1-3 REPEATS times (files of repeat N > 1 end in -rN): a
claim's "n" counts think times (BENCH1), client levels (BENCH2) or routes
(BENCH3) of every repeat, pooled, and its unit says so. A ratio claim is judged within a factor of 2 of the paper's figure
(the machines are 25 years apart); an order or a "no error" claim by its
own terms."""
import glob, json, os, re, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import verdict  # noqa: E402 (lab/src/verdict.py)

out, rows_tsv, quick = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
ran = {l.split("\t")[0] for l in open(rows_tsv) if l.strip() and l.split("\t")[4] == "ok"}


def load(tag):
    try:
        return json.load(open(os.path.join(out, "raw", tag + ".json")))
    except (OSError, ValueError):
        return None


DB = "pg" if load("apache-fcgi-perl-pg-b2") else "sqlite"
OTHERS = ["mod_perl", "php", "servlet"]


def tag(route, db=DB):
    return "apache-%s-%s" % (route, db)


def sfx(rep):
    return "" if rep == 1 else "-r%d" % rep


def repeats(pattern):
    """The repeats of which FastCGI's row has a PATTERN file (PATTERN: glob with {} for the suffix)."""
    return [r for r in range(1, 100) if glob.glob(os.path.join(out, "raw", tag("fcgi-perl") + pattern.format(sfx(r))))]


B1_REPS = repeats("-b1-think*{}-knee.json")
B2_REPS = repeats("-b2{}.json")
B3_REPS = repeats("-b3-rate*{}.json")


def per(unit, reps):
    """A unit that says what n counts: UNIT, per ... [and repeat]."""
    return unit + (" and repeat" if len(reps) > 1 else "")


def levels(route, rep=1):
    d = load(tag(route) + "-b2" + sfx(rep))
    return {e["active"]: e["mean_ms"] for e in (d or {}).get("levels", []) if e.get("active") and e.get("mean_ms")}


def per_level(a, b):
    """a's mean time over b's at each client level both have, in every repeat."""
    got = []
    for rep in B2_REPS:
        la, lb = levels(a, rep), levels(b, rep)
        got += [la[k] / lb[k] for k in la if k in lb and lb[k]]
    return got


def knees(route, rep=1):
    """{think time: the knee search's result} of the route's Apache row in a repeat."""
    got = {}
    for f in glob.glob(os.path.join(out, "raw", tag(route) + "-b1-think*%s-knee.json" % sfx(rep))):
        m = re.search(r"-b1-think(\d+)%s-knee\.json$" % sfx(rep), f)
        k = m and load(os.path.basename(f)[:-5])
        if k:
            got[int(m.group(1))] = k
    return got


def r2(route, rep=1):
    lv = levels(route, rep)
    xs = sorted(lv)
    if len(xs) < 3:
        return None
    mx = sum(xs) / len(xs)
    my = sum(lv[x] for x in xs) / len(xs)
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((lv[x] - my) ** 2 for x in xs)
    sxy = sum((x - mx) * (lv[x] - my) for x in xs)
    return sxy * sxy / (sxx * syy) if sxx and syy else None


def band(paper):
    return paper / 2, paper * 2


def claim(text, where, paper, measured, low, high, how, untestable=None):
    if untestable or not measured:
        return {"claim": text, "where": where, "paper": paper, "measured": None,
                "verdict": "cannot be tested here", "why": untestable or "no measurement in this run"}
    v, why = verdict.judge(measured, low, high)
    return {"claim": text, "where": where, "paper": paper, "measured": measured, "verdict": v,
            "why": "%s (%s)" % (why, how)}


dbname = "PostgreSQL" if DB == "pg" else "SQLite"
claims = []

# ---------------------------------------------------------------- BENCH1
vals, tr, sv, capped_ties, any_knee = [], [], [], 0, False
mp_steps, mp_judged, mp_capped = [], [], set()
for rep in B1_REPS or [1]:
    fk = knees("fcgi-perl", rep)
    ok = {r: knees(r, rep) for r in OTHERS}
    any_knee = any_knee or bool(fk)
    for t, k in fk.items():
        best = max((ok[r][t] for r in OTHERS if t in ok[r]), key=lambda x: x["knee"], default=None)
        if not best or not best["knee"]:
            continue
        if k["capped"] and best["capped"]:
            capped_ties += 1
            continue
        vals.append(k["knee"] / best["knee"])
    for t, k in fk.items():
        bk = max((ok[r][t] for r in OTHERS if t in ok[r]), key=lambda x: x.get("kb_per_s_at_knee") or 0, default=None)
        best = (bk or {}).get("kb_per_s_at_knee") or 0
        # Both at the cap: both carried the load offered, not their capacity.
        if best and k.get("kb_per_s_at_knee") and not (k["capped"] and bk["capped"]):
            tr.append(k["kb_per_s_at_knee"] / best)
    sv += [ok["servlet"][t]["knee"] / k["knee"] for t, k in fk.items() if t in ok["servlet"] and k["knee"]
           and not (k["capped"] and ok["servlet"][t]["capped"])]
    mp = ok["mod_perl"]
    # Each 3-second step of the paper's think times (2 -> 5 s, 5 -> 8 s) whose
    # knees are both known: a capped knee is only a lower bound.
    for a, b in ((a, a + 3) for a in sorted(mp) if a + 3 in mp):
        if mp[a]["knee"] and not mp[a]["capped"] and not mp[b]["capped"]:
            mp_steps.append(mp[b]["knee"] / mp[a]["knee"])
            if (a, b) not in mp_judged:
                mp_judged.append((a, b))
        elif mp[b]["capped"]:
            mp_capped.add(b)
# A step judged in some repeats and capped in others is named among the capped too.
capped = ["T = %d s" % b for b in sorted(mp_capped)]
untest = None
if not any_knee and glob.glob(os.path.join(out, "raw", tag("fcgi-perl") + "-b1-think*.json")):
    untest = "BENCH1 ran as a ramp (B1_MODE=ramp) whose cap every route but CGI reached: no knee to compare"
if any_knee and not vals:
    untest = "every route served the cap of %d clients at every think time: raise B1_CAP" % max(
        k["knee"] for k in knees("fcgi-perl").values()) if capped_ties else None
claims.append(claim(
    "FastCGI is the fastest protocol we tested. It managed to handle more concurrent clients than every other protocol, even when the think time was minimum",
    "§4.1, fig. 5", "FastCGI first at T = 2, 5, 8 s",
    verdict.stat(vals, per("x (FastCGI's knee over the best other's, per think time", B1_REPS) + ")"),
    1.0001, None, "Apache rows on %s; knee search" % dbname, untest if not vals else None))
claims.append(claim(
    "It also managed to produce more traffic than every other protocol",
    "§4.1, table 1", "1.38x (FastCGI 2250 KB/s over mod_perl 1631)", verdict.stat(tr, per("x (per think time", B1_REPS) + ")"),
    1.0001, None, "KB/s in the largest served probe, FastCGI over the best other route, Apache on %s" % dbname,
    untest if not tr else None))
claims.append(claim(
    "Servlets on the other hand performed rather poorly, managing to serve 75% less clients that FastCGI did",
    "§4.1, fig. 5", "0.25x", verdict.stat(sv, per("x (servlet's knee over FastCGI's, per think time", B1_REPS) + ")"),
    *band(0.25), "within a factor of 2 of 0.25x; Apache on %s" % dbname, untest if not sv else None))
claims.append(claim(
    "Mod perl ... managed to scale very well when the think time raised, doubling the served clients for a 3 second increase",
    "§4.1, fig. 5", "2x per 3 s (T = 2, 5, 8 s)",
    verdict.stat(mp_steps, per("x (mod_perl's knee over its knee 3 s of think time before, per step", B1_REPS)
                 + ": %s)" % ", ".join("T = %d to %d s" % ab for ab in mp_judged)) if mp_steps else None,
    1.5, 2.7, "mod_perl's knee per 3 s more think time, Apache on %s%s" % (
        dbname, "; not judged where the knee reached the cap (%s: raise B1_CAP)" % ", ".join(capped) if capped else ""),
    None if mp_steps else (
        "mod_perl's knee reached the cap (B1_CAP) at %s: raise B1_CAP" % ", ".join(capped) if capped else
        "this run has no two knees 3 s of think time apart (B1_THINKS; --quick probes T = 1 s only)")))

# ---------------------------------------------------------------- BENCH2
claims.append(claim(
    "The FastCGI is clearly first, but the gap with mod perl is narrow",
    "§4.2, fig. 6", "narrow (no figure)", verdict.stat(per_level("mod_perl", "fcgi-perl"), per("x (mod_perl's mean time over FastCGI's, per client level", B2_REPS) + ")"),
    1.0, 1.5, "first and narrow: 1.0-1.5x; Apache on %s" % dbname))
claims.append(claim(
    "Servlets were four time slower than FastCGI",
    "§4.2, fig. 6", "4x", verdict.stat(per_level("servlet", "fcgi-perl"), per("x (per client level", B2_REPS) + ")"),
    *band(4.0), "within a factor of 2 of 4x; Apache on %s" % dbname))
claims.append(claim(
    "PHP was two times slower",
    "§4.2, fig. 6", "2x", verdict.stat(per_level("php", "fcgi-perl"), per("x (per client level", B2_REPS) + ")"),
    *band(2.0), "within a factor of 2 of 2x; Apache on %s" % dbname))
lin = [x for rep in B2_REPS for x in (r2("fcgi-perl", rep), r2("mod_perl", rep)) if x is not None]
claims.append(claim(
    "Both protocols provide a linear increase of the response time",
    "§4.2, fig. 6", "linear (FastCGI, mod_perl)", verdict.stat(lin, per("R² of a line through mean time against clients (FastCGI, mod_perl", B2_REPS) + ")"),
    0.9, None, "linear: R² >= 0.9; Apache on %s" % dbname))
claims.append(claim(
    "the results were orders of magnitude different from other technologies (differences of about 1000%)",
    "§4 (CGI left out)", "about 10x", verdict.stat(per_level("cgi", "fcgi-perl"), per("x (CGI's BENCH2 mean time over FastCGI's, per client level", B2_REPS) + ")"),
    5.0, None, "CGI at least 5x FastCGI's time; Apache on %s" % dbname))

# ---------------------------------------------------------------- BENCH3
errs = []
for rep in B3_REPS:
    for route in ["fcgi-perl", "mod_perl", "php", "servlet"]:
        n = None
        for rate in (14, 16, 17, 20, 22, 30):
            d = load("%s-b3-rate%d%s" % (tag(route), rate, sfx(rep)))
            if d:
                n = (n or 0) + verdict.errors(d)
        if n is not None:
            errs.append(n)
claims.append(claim(
    "no protocol produced any error in all test cases",
    "§4.3", "0 errors at 14-30 requests/s", verdict.stat(errs, "errors (per route%s, summed over its rates)" % (" and repeat" if len(B3_REPS) > 1 else "")),
    None, 0, "FastCGI, mod_perl, PHP, servlet behind Apache on %s, rates up to 30/s" % dbname))

# ---------------------------------------------------------------- BENCH4
def b4(route, db, i):
    """The last running mean/deviation of the route's i-th BENCH4 run."""
    d = load(tag(route, db) + ("-b4" if i == 1 else "-b4-r%d" % i))
    run = (d or {}).get("running") or []
    return run[-1] if run else None


b4db = DB if b4("fcgi-perl", DB, 1) else "sqlite"
m, s = [], []
for i in range(1, 100):
    f4 = b4("fcgi-perl", b4db, i)
    if not f4:
        break
    others = [o for o in (b4(r, b4db, i) for r in OTHERS) if o]
    if others and f4["mean_ms"]:
        m.append(min(o["mean_ms"] for o in others) / f4["mean_ms"])
    if others and f4.get("stddev_ms"):
        s.append(min(o["stddev_ms"] for o in others) / f4["stddev_ms"])
b4name = "PostgreSQL" if b4db == "pg" else "SQLite"
claims.append(claim(
    "once again FastCGI is the fastest ... protocol we tested",
    "§4.4, fig. 7", "FastCGI's mean the lowest",
    verdict.stat(m, "x (the fastest other route's final running mean over FastCGI's, per run)"),
    1.0001, None, "> 1: FastCGI fastest; Apache on %s" % b4name))
claims.append(claim(
    "and the more predictable protocol we tested",
    "§4.4, fig. 8", "FastCGI's deviation the lowest",
    verdict.stat(s, "x (the steadiest other route's final deviation over FastCGI's, per run)"),
    1.0001, None, "> 1: FastCGI steadiest; Apache on %s" % b4name))

claims.append(claim(
    "Serving dynamic applications is a memory-intensive task. The fastest memory a server has the better",
    "§6", "(no figure)", None, None, None, "",
    "one machine: memory speed cannot be varied here (each route's memory during BENCH2 is in the summary)"))
verdict.write(out, claims)
