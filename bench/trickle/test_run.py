"""The trickle runner's pure parts: case parsing, the nginx config's
connection limit, the report. python3 -m unittest bench/trickle/test_run.py"""
import importlib.util
import sys
import unittest
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("trickle_run", HERE / "run.py")
trickle = importlib.util.module_from_spec(_spec)
sys.modules["trickle_run"] = trickle
_spec.loader.exec_module(trickle)


class Cases(unittest.TestCase):
    def test_streams_and_rates(self):
        self.assertEqual(trickle.parse_cases("1000:20,10000:2"), [(1000, 20.0), (10000, 2.0)])
        self.assertEqual(trickle.parse_cases("500"), [(500, 20.0)])

    def test_bad_cases_are_refused(self):
        for bad in ("x:1", "0:20", "10:0", "10:-1"):
            with self.assertRaises(trickle.ov.BenchError, msg=bad):
                trickle.parse_cases(bad)


class NginxConf(unittest.TestCase):
    def test_two_connections_per_stream(self):
        conf = trickle.nginx_conf(Path("/tmp/x"), 8001, 9001, 10000)
        self.assertIn("worker_connections 21024;", conf)
        self.assertEqual(conf.count("worker_connections"), 1)
        self.assertIn("proxy_buffering off;", conf)


class Report(unittest.TestCase):
    def test_ratios_and_added_delay(self):
        def row(target, cpu, events, delay50, delay99, kib=None):
            r = {"target": target, "streams": 1000, "tps": 20.0, "window_events": events, "errors": 0,
                 "delay_us": {"p50": delay50, "p99": delay99}}
            if cpu is not None:
                r.update(cpu_s=cpu, cpu_us_per_event=cpu * 1e6 / events, rss_idle_mib=10.0,
                         rss_loaded_mib=10.0 + kib * 1000 / 1024, kib_per_stream=kib)
            return r
        results = [row("direct", None, 500_000, 100, 400), row("nginx", 10.0, 500_000, 150, 600, 20.0),
                   row("llmgate", 12.0, 500_000, 170, 700, 30.0)]
        args = SimpleNamespace(server_cpu=1, load_cpu=0, ttft_ms=100, tokens=200, ramp=10, warmup=15, duration=25,
                               history_kib=0)
        meta = {"command": "c", "date": "d", "machine": "m", "revision": "r", "nginx": "n"}
        text = trickle.report(results, args, meta)
        self.assertIn("## 1,000 streams at 20 tokens/s each", text)
        self.assertIn("| nginx | 500,000 | 10.00 | 20.0 |", text)
        self.assertIn("| llmgate | 500,000 | 12.00 | 24.0 |", text)
        self.assertIn("+70 / +300", text)
        self.assertIn("CPU per event 1.20×", text)
        self.assertIn("(a short prompt)", text)
        args.history_kib = 32
        self.assertRegex(trickle.report(results, args, meta),
                         r"request body: 3\d,\d{3} bytes \(a conversation with about 32 KiB")


if __name__ == "__main__":
    unittest.main()
