"""Unit tests of the scale runner's pure parts: python3 bench/scale/test_scale.py
(or python3 -m unittest bench/scale/test_scale.py)."""

import importlib.util
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("scale_run", HERE / "run.py")
scale = importlib.util.module_from_spec(_spec)
sys.modules["scale_run"] = scale
_spec.loader.exec_module(scale)
ov = scale.ov  # bench/overhead/run.py


class Limits(unittest.TestCase):
    def test_default_streams(self):
        self.assertEqual(scale.default_streams(20000), 9968)       # (20000 - 64) // 2
        self.assertEqual(scale.default_streams(1_048_576), 10000)  # capped at the 10,000
        self.assertEqual(scale.default_streams(None), 10000)       # unlimited
        self.assertEqual(scale.default_streams(1024), 480)
        self.assertEqual(scale.default_streams(10), 1)

    def test_config(self):
        cfg = scale.streams_config(1234, 9968, 1)
        self.assertEqual(cfg["server"]["workers"], 1)
        self.assertEqual(cfg["server"]["limits"]["max_connections"], 10068)
        self.assertEqual(cfg["providers"][0]["pool"]["max_connections"], 10000)  # the key's maximum
        self.assertEqual(scale.streams_config(1234, 500, 1)["providers"][0]["pool"]["max_connections"], 600)


class Derived(unittest.TestCase):
    def test_plateau_and_per_stream(self):
        samples = [{"t": 0, "in_flight": 0, "rss_kib": 8000},
                   {"t": 1, "in_flight": 500, "rss_kib": 20000},
                   {"t": 2, "in_flight": 990, "rss_kib": 40000},
                   {"t": 3, "in_flight": 1000, "rss_kib": 41000},
                   {"t": 4, "in_flight": 1000, "rss_kib": 42000},
                   {"t": 5, "in_flight": None, "rss_kib": 42000},
                   {"t": 6, "in_flight": 10, "rss_kib": 42000}]
        pl = scale.plateau(samples, 1000)
        self.assertEqual([s["t"] for s in pl], [2, 3, 4])
        self.assertAlmostEqual(scale.per_stream_kib(8000, [s["rss_kib"] for s in pl], 1000), 33.0)
        self.assertIsNone(scale.per_stream_kib(8000, [], 1000))

    def test_stall_verdict(self):
        self.assertEqual(scale.stall_verdict({"count": 10, "max": 1_050_000.0})[0], 0)
        self.assertEqual(scale.stall_verdict({"count": 10, "max": 3_500_000.0})[0], 1)
        self.assertEqual(scale.stall_verdict({"count": 0})[0], -1)

    def test_derive_streams(self):
        res = {"streams": 2, "tps": 1.0, "baseline": {"rss_kib": 1000, "rss_anon_kib": 500},
               "samples": [{"t": 0.0, "in_flight": 2, "rss_kib": 1064, "rss_anon_kib": 560, "hwm_kib": 1064,
                            "fds": 20, "sim_rss_kib": 9, "loadgen_rss_kib": 7, "gateway_cpu_s": 1.0,
                            "sim_cpu_s": 0.5},
                           {"t": 1.0, "in_flight": 2, "rss_kib": 1064, "rss_anon_kib": 560, "hwm_kib": 1064,
                            "fds": 20, "sim_rss_kib": 9, "loadgen_rss_kib": 7, "gateway_cpu_s": 1.001,
                            "sim_cpu_s": 0.5005}],
               "loadgen": {"requests": 2, "errors": 0, "events": 88,
                           "latency_us": {"gap": {"count": 86, "max": 1_010_000.0}}},
               "sim_stats": {"streams_aborted": 0, "streams_cut": 0}}
        scale.derive_streams(res)
        d = res["derived"]
        self.assertEqual(d["kib_per_stream"], 32.0)
        self.assertTrue(d["kib_pass"])
        self.assertEqual(d["anon_kib_per_stream"], 30.0)
        self.assertTrue(d["none_dropped"])
        self.assertTrue(d["all_open_at_once"])
        self.assertEqual(d["events_per_stream"], 44)
        self.assertAlmostEqual(d["gateway_us_per_event"], 500.0)  # 1 ms of CPU for 2 events


class Workers(unittest.TestCase):
    def test_other_work(self):
        r = {"core_busy": {"loadgen": 1.0, "server": 0.9}, "wall_s": 10.0, "loadgen_cpu_share": 0.5,
             "cpu": {"upstream": {"s": 3.0}, "llmgate": {"s": 8.0}}}
        self.assertAlmostEqual(scale.other_work(r), 0.3)  # 1.9 - 0.5 - 1.1
        r["core_busy"]["loadgen"] = None
        self.assertIsNone(scale.other_work(r))


    def test_kernel_cpus(self):
        a = {"softirq": 100, "irq": 0, "steal": 10, "total": 1000}
        b = {"softirq": 400, "irq": 0, "steal": 10, "total": 2000}
        k = scale.kernel_cpus(a, b, 2)
        self.assertAlmostEqual(k["softirq"], 0.6)  # 300 of 1000 ticks over 2 CPUs
        self.assertEqual(k["steal"], 0.0)
        self.assertIsNone(scale.kernel_cpus(a, a, 2)["softirq"])
        self.assertIn("softirq", scale.stat_fields([0]))


class OverheadReuse(unittest.TestCase):
    """bench/overhead/run.py's upstream reuse: llmgate's own counter first."""

    TEXT0 = ('llmgate_upstream_requests_total{deployment="upstream/m",connection="new"} 4\n'
             'llmgate_upstream_requests_total{deployment="upstream/m",connection="reused"} 10\n')
    TEXT1 = ('llmgate_upstream_requests_total{deployment="upstream/m",connection="new"} 14\n'
             'llmgate_upstream_requests_total{deployment="upstream/m",connection="reused"} 100\n')

    def test_from_metric(self):
        d = ov.llmgate_delta(ov.parse_prometheus(self.TEXT0), ov.parse_prometheus(self.TEXT1))
        self.assertEqual(d["upstream_requests"], {"new": 10, "reused": 90})
        r = {"llmgate_metrics": d, "upstream_requests": 100, "upstream_connections": 50}
        self.assertAlmostEqual(ov.reuse(r), 0.9)  # the metric wins over the upstream's counters

    def test_fallback_to_upstream_counters(self):
        d = ov.llmgate_delta({}, {})
        self.assertEqual(d["upstream_requests"], {"new": 0, "reused": 0})
        self.assertAlmostEqual(ov.reuse({"llmgate_metrics": d, "upstream_requests": 100,
                                         "upstream_connections": 50}), 0.5)
        self.assertAlmostEqual(ov.reuse({"upstream_requests": 100, "upstream_connections": 1}), 0.99)
        self.assertIsNone(ov.reuse({"upstream_requests": 0, "upstream_connections": 0}))


if __name__ == "__main__":
    unittest.main()
