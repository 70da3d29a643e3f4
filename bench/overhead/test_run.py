"""Unit tests of the runner's pure parts: python3 -m unittest bench/overhead/test_run.py"""

import json
import re
import sys
import unittest
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run  # noqa: E402


def unquote_nginx(s: str) -> str:
    assert s[0] == s[-1] == "'"
    return re.sub(r"\\(.)", r"\1", s[1:-1])


class Bodies(unittest.TestCase):
    def test_sse_is_a_whole_openai_stream(self):
        text = run.chat_completion_sse()
        events = [e for e in text.split("\n\n") if e]
        self.assertEqual(len(events), 22)  # role, 18 tokens, finish, usage, [DONE]
        self.assertEqual(events[-1], "data: [DONE]")
        chunks = [json.loads(e[len("data: "):]) for e in events[:-1]]
        self.assertEqual(chunks[0]["choices"][0]["delta"]["role"], "assistant")
        self.assertEqual("".join(c["choices"][0]["delta"].get("content", "") for c in chunks[:-1]),
                         "".join(run.ANSWER_TOKENS))
        self.assertEqual(chunks[-2]["choices"][0]["finish_reason"], "stop")
        self.assertEqual(chunks[-1]["choices"], [])
        self.assertEqual(chunks[-1]["usage"]["completion_tokens"], 18)
        # The load generator's first-token rule: the role chunk's "content":"" is not a token.
        first = next(i for i, e in enumerate(events) if re.search(r'"content":"[^"]', e))
        self.assertEqual(first, 1)

    def test_json_is_a_chat_completion(self):
        obj = json.loads(run.chat_completion_json())
        self.assertEqual(obj["object"], "chat.completion")
        self.assertEqual(obj["choices"][0]["message"]["content"], "".join(run.ANSWER_TOKENS))

    def test_sdk_head_is_fifteen_fields_with_the_load_generators_three(self):
        self.assertEqual(run.head_flags(False), [])
        flags = run.head_flags(True)
        self.assertEqual(flags[0::2], ["--header"] * len(run.SDK_HEADERS))
        names = [h.split(":", 1)[0].lower() for h in flags[1::2]]
        self.assertEqual(len(names) + 3, 15)  # with Host, Content-Type, Content-Length
        self.assertIn("connection", names)
        self.assertEqual(len(set(names)), len(names))
        self.assertFalse({"host", "content-type", "content-length"} & set(names))

    def test_request_bodies(self):
        self.assertFalse(json.loads(run.request_body(False))["stream"])
        s = json.loads(run.request_body(True))
        self.assertTrue(s["stream"])
        self.assertEqual(s["stream_options"], {"include_usage": True})
        self.assertEqual(s["model"], run.PUBLIC_MODEL)


class NginxConfig(unittest.TestCase):
    def test_string_quoting(self):
        self.assertEqual(run.nginx_string("a'b\\c"), "'a\\'b\\\\c'")
        with self.assertRaises(ValueError):
            run.nginx_string("$x")

    def test_long_return_is_split_into_short_pieces(self):
        body = run.chat_completion_sse()
        text = run.nginx_return_long(body, "")
        sets = re.findall(r"^set \$(body\d+) ('(?:[^'\\]|\\.)*');$", text, re.M | re.S)
        self.assertGreater(len(sets), 1)
        self.assertTrue(all(len(v) < 4096 for _, v in sets))  # nginx's longest config token
        self.assertEqual("".join(unquote_nginx(v) for _, v in sets), body)
        ret = text.strip().splitlines()[-1]
        self.assertEqual(ret, 'return 200 "' + "".join(f"${n}" for n, _ in sets) + '";')

    def test_proxy_config_has_the_keepalive_settings(self):
        conf = run.proxy_nginx_conf(Path("/tmp/x"), [(8001, 9001)])
        for needle in ("keepalive 64;", "proxy_http_version 1.1;", 'proxy_set_header Connection "";',
                       "proxy_buffering off;", "access_log off;", "worker_processes 1;", "daemon off;",
                       "proxy_pass http://up_9001;", "listen 127.0.0.1:8001;"):
            self.assertIn(needle, conf)
        self.assertEqual(conf.count("{"), conf.count("}"))


class Metrics(unittest.TestCase):
    TEXT = """# HELP x
llmgate_requests_total{model="bench",outcome="success"} 10
llmgate_requests_total{model="bench",outcome="error"} 2
llmgate_gateway_overhead_seconds_sum{phase="admission"} 0.001
llmgate_gateway_overhead_seconds_count{phase="admission"} 10
llmgate_requests_in_flight 3
"""

    def test_parse_and_sum(self):
        m = run.parse_prometheus(self.TEXT)
        self.assertEqual(run.metric_sum(m, "llmgate_requests_total"), 12)
        self.assertEqual(run.metric_sum(m, "llmgate_requests_total", outcome="success"), 10)
        self.assertEqual(run.metric_sum(m, "llmgate_requests_in_flight"), 3)
        self.assertEqual(run.metric_labels(m, "llmgate_requests_total", "outcome"), {"success", "error"})

    def test_delta(self):
        m0 = run.parse_prometheus(self.TEXT)
        m1 = run.parse_prometheus(self.TEXT.replace(" 10\n", " 30\n").replace("0.001", "0.003"))
        d = run.llmgate_delta(m0, m1)
        self.assertEqual(d["requests"], {"success": 20})
        self.assertAlmostEqual(d["overhead_us"]["admission"]["mean"], 100.0)


def result(group, kind, load, target, rate, p50, p99, ttft_p99=None, cpu_us=None):
    lat = {"total": {"p50": p50, "p90": p50, "p99": p99, "p999": p99, "count": 100}}
    if ttft_p99 is not None:
        lat["ttft"] = {"p50": p50, "p90": p50, "p99": ttft_p99, "p999": ttft_p99, "count": 100}
    r = {"group": group, "kind": kind, "load": load, "target": target, "id": f"{group}/{kind}/{target}/{load}",
         "loadgen": {"rate": rate, "errors": 0, "latency_us": lat}}
    if cpu_us is not None:
        r["cpu"] = {target: {"us_per_request": cpu_us}}
    return r


class Derived(unittest.TestCase):
    def results(self):
        rs = []
        for kind in run.KINDS:
            t = 1 if kind == "stream" else None
            cpu = 50 if kind == "stream" else 70  # against nginx's 30: 1.67x, 2.33x
            rs += [result("static", kind, "closed64", "direct", 30000, 500, 900, t and 900),
                   result("static", kind, "closed64", "nginx", 20000, 700, 1200, t and 1200, 30),
                   result("static", kind, "closed64", "llmgate", 15000, 800, 1500, t and 1500, cpu),
                   result("static", kind, "rate500", "direct", 500, 100, 200, t and 200),
                   result("static", kind, "rate500", "nginx", 500, 130, 260, t and 260),
                   result("static", kind, "rate500", "llmgate", 500, 170, 500, t and 500)]
        run.add_derived(rs)
        return rs

    def test_added_latency(self):
        rs = self.results()
        lg = run.find(rs, "static", "stream", "rate500", "llmgate")
        self.assertEqual(lg["added_us"]["total_p50"], 70)
        self.assertEqual(lg["added_us"]["total_p99"], 300)
        self.assertEqual(lg["added_us"]["ttft_p99"], 300)
        self.assertNotIn("added_us", run.find(rs, "static", "stream", "rate500", "direct"))

    def test_targets(self):
        checks = {c[0]: c for c in run.target_checks(self.results(), "closed64", "rate500")}
        self.assertEqual(checks["nonstream closed-loop throughput, llmgate / nginx"][3], "PASS")  # 0.75 >= 0.6
        self.assertEqual(checks["stream closed-loop throughput, llmgate / nginx"][3], "MISS")     # 0.75 < 0.8
        self.assertEqual(checks["stream closed-loop CPU per request, llmgate / nginx"][3], "PASS")     # 1.67
        self.assertEqual(checks["nonstream closed-loop CPU per request, llmgate / nginx"][3], "MISS")  # 2.33
        self.assertEqual(checks["nonstream at 500/s: llmgate added p50 − nginx added p50"][3], "PASS")  # 40
        self.assertEqual(checks["nonstream at 500/s: llmgate added p99 / nginx added p99"][3], "MISS")  # 5
        self.assertEqual(checks["stream at 500/s: llmgate added TTFT p99"][3], "MISS")  # 300

    def test_missing_points_skip(self):
        checks = run.target_checks([], "closed64", "rate500")
        self.assertTrue(all(c[3] == "SKIP" for c in checks))


class Planning(unittest.TestCase):
    def args(self, **kw):
        a = dict(groups="static,sim", sim_loads="closed", only=None)
        a.update(kw)
        return SimpleNamespace(**a)

    def test_default_plan(self):
        loads = run.make_loads(64, [500, 5000], None)
        self.assertEqual([l.id for l in loads], ["closed64", "rate500", "rate5000"])
        pts = run.plan(self.args(), loads)
        self.assertEqual(len(pts), 2 * 3 * 3 + 2 * 1 * 3)
        self.assertEqual([p.target for p in pts[:3]], list(run.TARGETS))  # interleaved

    def test_only_brings_the_direct_baseline(self):
        loads = run.make_loads(64, [500, 5000], None)
        ids = [p.id for p in run.plan(self.args(only="static/stream/llmgate/rate500"), loads)]
        self.assertEqual(ids, ["static/stream/direct/rate500", "static/stream/llmgate/rate500"])

    def test_load_flags(self):
        closed, r500, _ = run.make_loads(64, [500, 5000], None)
        self.assertEqual(closed.flags(), ["--connections", "64"])
        self.assertEqual(r500.flags(), ["--rate", "500"])
        self.assertEqual(run.make_loads(64, [500], 256)[1].flags(), ["--rate", "500", "--connections", "256"])



class CallgrindDump(unittest.TestCase):
    def test_self_cost_leaves_out_callees_and_reads_compressed_names(self):
        import importlib.util
        import tempfile
        # bench/overhead/profile.py by its path (the standard library has a `profile` too).
        spec = importlib.util.spec_from_file_location("overhead_profile", Path(__file__).parent / "profile.py")
        prof = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(prof)
        dump = """# callgrind format
events: Ir
summary: 180

ob=(1) /bin/x
fl=(1) a.cpp
fn=(1) parent
10 5
+1 20
cfn=(2) child
calls=3 40
12 100
fn=(2)
40 30
fn=(3) other
5 25
fn=(1)
*  0
-2 0
"""
        with tempfile.NamedTemporaryFile("w", suffix=".out", delete=False) as f:
            f.write(dump)
        total, fns = prof.callgrind_self_costs(Path(f.name))
        Path(f.name).unlink()
        self.assertEqual(total, 80)  # 5 + 20 + 30 + 25: the call's 100 is child's, inclusive
        self.assertEqual(fns, [(30, "child"), (25, "parent"), (25, "other")])


class ImageTunables(unittest.TestCase):
    def test_the_dockerfiles_value_unless_the_environment_sets_one(self):
        import os
        from unittest import mock
        line = re.search(r"^ENV GLIBC_TUNABLES=(\S+)$", (run.REPO / "Dockerfile").read_text(), re.M)
        self.assertIsNotNone(line)
        with mock.patch.dict(os.environ, {}, clear=False):
            os.environ.pop("GLIBC_TUNABLES", None)
            self.assertEqual(run.image_glibc_tunables(), line.group(1))
            self.assertEqual(run.llmgate_env()["GLIBC_TUNABLES"], line.group(1))
        with mock.patch.dict(os.environ, {"GLIBC_TUNABLES": ""}):
            self.assertEqual(run.image_glibc_tunables(), "")  # glibc's defaults, on purpose


class Syscalls(unittest.TestCase):
    def test_perf_stat_csv_by_kind(self):
        text = ("\n"
                "365336,,raw_syscalls:sys_enter,5001119650,100.00,,\n"
                "201403,,syscalls:sys_enter_recvfrom,5001119650,100.00,,\n"
                "2567,,syscalls:sys_enter_recvmsg,5001119650,100.00,,\n"
                "0,,syscalls:sys_enter_readv,5001119650,100.00,,\n"
                "100895,,syscalls:sys_enter_sendmsg,5001119650,100.00,,\n"
                "59647,,syscalls:sys_enter_epoll_wait,5001119650,100.00,,\n"
                "724,,syscalls:sys_enter_epoll_ctl,5001119650,100.00,,\n"
                "<not counted>,,syscalls:sys_enter_writev,0,100.00,,\n")
        self.assertEqual(run.parse_perf_syscalls(text),
                         {"total": 365336, "read": 203970, "write": 100895, "wait": 59647, "epoll_ctl": 724,
                          "other": 365336 - 203970 - 100895 - 59647 - 724})

    def test_table(self):
        per = {"total": 3.5, "read": 2.0, "write": 1.0, "wait": 0.5, "epoll_ctl": 0.0, "other": 0.0}
        self.assertEqual(run.syscall_table("target", [("llmgate", per)]),
                         ["| target | total | read | write | wait | epoll_ctl | other |",
                          "|---|---:|---:|---:|---:|---:|---:|",
                          "| llmgate | 3.50 | 2.00 | 1.00 | 0.50 | 0.00 | 0.00 |"])

    def test_no_total_is_no_answer(self):
        self.assertIsNone(run.parse_perf_syscalls("event syntax error: 'raw_syscalls:sys_enter'\n"))
        self.assertIsNone(run.parse_perf_syscalls("<not supported>,,raw_syscalls:sys_enter,0,100.00,,\n"))


if __name__ == "__main__":
    unittest.main()
