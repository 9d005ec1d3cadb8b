#!/usr/bin/env python3
"""Unit tests of verdict.py, chart.py and reqstats.py: python3 lab/src/test_verdict.py"""

import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chart  # noqa: E402
import reqstats  # noqa: E402
import verdict as v  # noqa: E402


class Verdict(unittest.TestCase):
    def test_stat_gives_median_and_spread_of_the_repeats(self):
        m = v.stat([3.0, 1.0, 2.0, 10.0, 4.0], "req/s")
        self.assertEqual((m["median"], m["min"], m["max"], m["n"], m["unit"]), (3.0, 1.0, 10.0, 5, "req/s"))

    def test_a_5xx_page_that_is_also_a_length_failure_is_one_error(self):
        # stoa bench, as ab, counts a 503 page as non-2xx and, its length
        # differing from the first response's, as failed: 466 requests
        # were 932 errors in the dynamic-routes BENCH3 table.
        d = {"failed": 466, "non_2xx": 466, "status": {"200": 534, "503": 466},
             "errors": {"timeout": 0, "length_mismatch": 466}, "requests": 1000}
        self.assertEqual(v.errors(d), 466)
        # Timeouts, a 2xx page of another length and an unsent request
        # are errors of their own.
        d = {"failed": 5, "non_2xx": 1, "not_sent": 2, "errors": {"timeout": 3, "length_mismatch": 2}}
        self.assertEqual(v.errors(d), 3 + 1 + 1 + 2)

    def test_stat_of_nothing_is_none(self):
        self.assertIsNone(v.stat([]))

    def test_ratio_pairs_values_of_the_same_repeat(self):
        m = v.ratio({1: 400.0, 2: 200.0, 3: 90.0}, {1: 200.0, 2: 100.0})
        self.assertEqual((m["median"], m["n"]), (2.0, 2))

    def test_judge_says_when_the_spread_crosses_the_bound(self):
        verdict, why = v.judge({"median": 1.9, "min": 0.9, "max": 2.5, "n": 5}, 1.0)
        self.assertEqual(verdict, "reproduced")
        self.assertIn("crosses", why)

    def test_judge_contradicts_a_median_outside_the_claim(self):
        verdict, why = v.judge({"median": 0.8, "min": 0.7, "max": 0.9, "n": 5}, 1.0)
        self.assertEqual(verdict, "contradicted")
        self.assertIn("no repeat", why)

    def test_check_refuses_a_verdict_outside_the_three(self):
        errs = v.check([{"claim": "c", "where": "p. 1", "paper": "2x", "measured": None,
                         "verdict": "partly", "why": "w"}])
        self.assertTrue(any("not one of" in e for e in errs))

    def test_check_refuses_a_verdict_without_a_measurement(self):
        errs = v.check([{"claim": "c", "where": "p. 1", "paper": "2x", "measured": None,
                         "verdict": "reproduced", "why": "w"}])
        self.assertTrue(errs)

    def test_render_opens_with_the_table_and_ends_with_the_provenance(self):
        with tempfile.TemporaryDirectory() as d:
            os.mkdir(os.path.join(d, "raw"))
            v.write(d, [{"claim": "Apache | Tomcat", "where": "p. 2", "paper": "1.9x",
                         "measured": v.stat([2.0, 1.8, 2.1], "x"), "verdict": "reproduced", "why": "w"}])
            with open(os.path.join(d, "raw", "meta.json"), "w") as f:
                json.dump({"quick": True, "repeats": 2, "loadavg_before": "3.1 2 1", "commit": "abc"}, f)
            text = v.render(d)
        self.assertTrue(text.startswith("## Verdicts"))
        self.assertIn("| Apache \\| Tomcat | p. 2 | 1.9x | 2.00x (1.80-2.10, n=3) | **reproduced** | w |", text)
        self.assertIn("on a loaded box", text)

    def test_a_high_load_average_is_the_experiments_own_when_other_work_took_little_cpu(self):
        def render(runs):
            with tempfile.TemporaryDirectory() as d:
                os.mkdir(os.path.join(d, "raw"))
                v.write(d, [{"claim": "c", "where": "p", "paper": "1x", "measured": v.stat([1.0], "x"),
                             "verdict": "reproduced", "why": "w"}])
                with open(os.path.join(d, "raw", "meta.json"), "w") as f:
                    json.dump({"quick": False, "repeats": 5, "nproc": 2, "runs": runs}, f)
                return v.render(d)
        # 10 s on 2 cores: the servers 9.5 s, ab 8 s, the machine 18 s busy.
        own = {"secs": 10.0, "load_cpu_s": 8.0, "server_cpu_s": {"apache": 9.5}, "loadavg_before": "9.3 5 3"}
        text = render([dict(own, machine_cpu_s=18.0)])
        self.assertNotIn("loaded box", text)
        self.assertIn("counts the experiment's own processes", text)
        # The same run with 8 s of other work beside it.
        text = render([dict(own, machine_cpu_s=25.5)])
        self.assertIn("Measured on a loaded box: other work", text)
        # Runs that did not record the machine's CPU: the load average alone.
        self.assertIn("other work shared the machine", render([own]))


class Chart(unittest.TestCase):
    def test_each_series_is_one_line_with_its_own_colour(self):
        series = {"s%d" % i: [(1, 10.0 + i), (2, 20.0), (64, 30.0)] for i in range(16)}
        svg = chart.lines("t", "clients", "req/s", series, log2_x=True)
        self.assertEqual(svg.count("<polyline"), 16)
        colours = {line.split('stroke="')[1].split('"')[0] for line in svg.splitlines() if line.startswith("<polyline")}
        self.assertEqual(len(colours), 16)

    def test_client_ticks_are_the_whole_numbers_measured(self):
        svg = chart.lines("t", "clients", "req/s", {"a": [(1, 1.0), (4, 2.0), (16, 3.0)]}, log2_x=True)
        ticks = [line.split(">")[1].split("<")[0] for line in svg.splitlines()
                 if 'text-anchor="middle">' in line and "<text x=" in line and "rotate" not in line]
        self.assertIn("4", ticks)
        self.assertFalse(any("." in t for t in ticks if t[:1].isdigit()))


class Modes(unittest.TestCase):
    def test_one_queue_is_one_peak(self):
        self.assertEqual(reqstats.modes([5.0 + 0.01 * i for i in range(200)]), 1)

    def test_two_bands_are_two_peaks(self):
        self.assertEqual(reqstats.modes([1.0] * 100 + [30.0] * 100), 2)


if __name__ == "__main__":
    unittest.main()
