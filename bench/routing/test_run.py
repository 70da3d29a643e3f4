"""Unit tests of the runner's pure parts: python3 -m unittest bench/routing/test_run.py"""

import asyncio
import random
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run  # noqa: E402


class Percentiles(unittest.TestCase):
    def test_interpolates_between_ranks(self):
        self.assertEqual(run.percentile([1, 2, 3, 4], 50), 2.5)
        self.assertEqual(run.percentile([5], 99), 5)
        self.assertIsNone(run.percentile([], 50))
        self.assertAlmostEqual(run.percentile(list(range(101)), 95), 95)


class Distributions(unittest.TestCase):
    def test_lognormal_quantile_matches_sampling(self):
        d = {"dist": "lognormal", "mean": 450, "stddev": 100}
        rng = random.Random(3)
        import math
        s2 = math.log1p((100 / 450) ** 2)
        mu = math.log(450) - s2 / 2
        draws = sorted(rng.lognormvariate(mu, math.sqrt(s2)) for _ in range(40000))
        self.assertAlmostEqual(run.dist_quantile(d, 95), draws[int(0.95 * len(draws))], delta=10)
        self.assertEqual(run.dist_quantile(300, 95), 300)
        self.assertAlmostEqual(run.dist_quantile({"dist": "normal", "mean": 100, "stddev": 10}, 50), 100)


class Oracle(unittest.TestCase):
    def setUp(self):
        self.scn = run.load_scenario(Path(run.HERE) / "scenarios" / "slowdown.yaml")
        self.profiles = {p.name: dict(p.profile) for p in self.scn.providers}

    def test_picks_the_lowest_mean_ttft(self):
        self.assertEqual(run.oracle_pick(self.scn, self.profiles), "fast")
        self.profiles["fast"]["ttft_ms"] = {"dist": "lognormal", "mean": 750, "stddev": 200}
        self.assertEqual(run.oracle_pick(self.scn, self.profiles), "mid")

    def test_skips_providers_with_errors_or_faults(self):
        self.profiles["fast"]["error_rate"] = 0.3
        self.assertEqual(run.oracle_pick(self.scn, self.profiles), "mid")
        self.profiles["fast"]["error_rate"] = 0
        self.profiles["fast"]["stall_before_first_token_ms"] = 600000
        self.profiles["fast"]["fault_rate"] = 0.1
        self.assertEqual(run.oracle_pick(self.scn, self.profiles), "mid")
        self.profiles["fast"]["fault_rate"] = 0  # configured but never applied
        self.assertEqual(run.oracle_pick(self.scn, self.profiles), "fast")

    def test_cheapest_within_the_ttft_limit(self):
        scn = run.load_scenario(Path(run.HERE) / "scenarios" / "cost.yaml")
        profiles = {p.name: dict(p.profile) for p in scn.providers}
        self.assertEqual(run.oracle_pick(scn, profiles), "value")
        profiles["value"]["ttft_ms"] = {"dist": "lognormal", "mean": 1200, "stddev": 250}
        self.assertEqual(run.oracle_pick(scn, profiles), "premium")


class Sse(unittest.TestCase):
    def test_splits_complete_events_and_keeps_the_rest(self):
        buf = bytearray(b'data: {"a":1}\n\ndata: [DONE]\r\n\r\ndata: {"b"')
        self.assertEqual(run.parse_sse_events(buf), [b'{"a":1}', b"[DONE]"])
        self.assertEqual(bytes(buf), b'data: {"b"')
        buf += b":2}\n\n: comment\n\n"
        self.assertEqual(run.parse_sse_events(buf), [b'{"b":2}'])


class Reaction(unittest.TestCase):
    @staticmethod
    def records(switch_at, before="a", after="b", rate=20, until=10.0):
        out, t, i = [], 0.0, 0
        while t < until:
            out.append({"i": i, "at": t, "t_send": t, "provider": before if t < switch_at else after})
            t += 1 / rate
            i += 1
        return out

    def change(self, at, expect, provider="a"):
        return {"label": "x", "provider": provider, "expect": expect, "threshold": 0.2, "applied_s": at,
                "until_s": 10.0}

    def test_leave_is_measured_from_the_change(self):
        # An instant switch is seen after the window's minimum of 5 requests.
        r = run.reaction(self.records(switch_at=5.0), self.change(5.0, "leave"), 10.0)
        self.assertAlmostEqual(r["reaction_s"], 0.25, delta=0.06)
        self.assertTrue(r["held"])
        self.assertFalse(r["vacuous"])
        # A switch 0.5 s after the change: the 1 s window still holds the old
        # provider until 80% of it is past the switch.
        r = run.reaction(self.records(switch_at=5.5), self.change(5.0, "leave"), 10.0)
        self.assertAlmostEqual(r["reaction_s"], 0.5 + 0.8, delta=0.11)

    def test_leave_that_never_happens(self):
        r = run.reaction(self.records(switch_at=99), self.change(5.0, "leave"), 10.0)
        self.assertIsNone(r["reaction_s"])

    def test_nothing_to_leave_is_vacuous(self):
        r = run.reaction(self.records(switch_at=0, before="b"), self.change(5.0, "leave"), 10.0)
        self.assertTrue(r["vacuous"])
        self.assertEqual(run.fmt_reaction(r), "n/a (0% before)")

    def test_return(self):
        r = run.reaction(self.records(switch_at=6.0, before="b", after="a"), self.change(5.0, "return"), 10.0)
        self.assertAlmostEqual(r["reaction_s"], 1.0 + 0.25, delta=0.11)

    def test_no_expectation_is_na(self):
        self.assertEqual(run.fmt_reaction(run.reaction([], self.change(5.0, None), 10.0)), "n/a")


class Scenarios(unittest.TestCase):
    def test_every_scenario_loads_and_makes_a_config(self):
        for path in sorted((Path(run.HERE) / "scenarios").glob("*.yaml")):
            scn = run.load_scenario(path)
            self.assertTrue(scn.policies, path)
            ports = {p.name: 1000 + i for i, p in enumerate(scn.providers)}
            for pol in scn.policies:
                cfg = run.gateway_config(scn, pol, ports, plain=False)
                self.assertEqual(cfg["models"][0]["routing"]["policy"], "ordered" if pol.oracle else pol.base)
                plain = run.gateway_config(scn, pol, ports, plain=True)
                self.assertNotIn("routing", plain["models"][0])
                self.assertNotIn("routing", plain)

    def test_policy_shorthand(self):
        p = run.parse_policy("latency+hedge", "t")
        self.assertEqual(p.routing, {"policy": "latency", "hedging": {"enabled": True}})
        self.assertEqual(run.parse_policy("latency", "t").routing["hedging"], {"enabled": False})
        self.assertTrue(run.parse_policy("oracle", "t").oracle)
        with self.assertRaises(run.BenchError):
            run.parse_policy("fastest", "t")
        with self.assertRaises(run.BenchError):
            run.parse_policy("latency+turbo", "t")

    def test_arrivals_are_seeded_poisson(self):
        scn = run.load_scenario(Path(run.HERE) / "scenarios" / "steady.yaml")
        a, b = run.arrivals(scn, 30), run.arrivals(scn, 30)
        self.assertEqual([x.at for x in a], [x.at for x in b])
        self.assertAlmostEqual(len(a) / 30, scn.rate, delta=scn.rate * 0.2)


class HttpClient(unittest.TestCase):
    def test_reads_a_chunked_body_with_trailers(self):
        async def go():
            reader = asyncio.StreamReader()
            reader.feed_data(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-A: 1\r\n\r\n"
                             b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nx-llmgate-output-tokens: 7\r\n\r\n")
            reader.feed_eof()
            status, headers = await run.read_head(reader)
            trailers = {}
            body = b"".join([p async for p in run.body_pieces(reader, headers, trailers)])
            return status, headers, body, trailers

        status, headers, body, trailers = asyncio.run(go())
        self.assertEqual((status, headers["x-a"], body), (200, "1", b"hello world"))
        self.assertEqual(trailers, {"x-llmgate-output-tokens": "7"})


if __name__ == "__main__":
    unittest.main()
