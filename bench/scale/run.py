#!/usr/bin/env python3
"""Scale benchmarks for llmgate (see README.md next to this file).

  streams  Many concurrent open streams through one gateway process (one
           worker): resident memory per open stream, file descriptors, and
           proof that no stream stalls or is dropped. Target: at most 32 KiB
           of RSS per open stream at 10,000 streams.
  workers  Closed-loop throughput (64 connections, streamed and non-streamed)
           of llmgate with server.workers 1 and 2, next to nginx with
           worker_processes 1 and 2, against the static nginx upstream of
           bench/overhead.

`run.py` runs both (streams first); `run.py streams` or `run.py workers` one.
The helpers (process control, /proc sampling, nginx and llmgate setup, the
request bodies, one measured load point) are bench/overhead/run.py's,
imported as a module.

Python 3.9+ standard library plus PyYAML.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "overhead"))
import run as ov  # noqa: E402  bench/overhead/run.py

REPO = ov.REPO
HOST = ov.HOST
PATH = ov.PATH
BenchError = ov.BenchError
log = ov.log

TARGET_KIB_PER_STREAM = 32.0   # the budget
STALL_GAP_S = 3.0              # a gap between two events longer than this is a stall
FD_MARGIN = 64                 # fds the gateway keeps for listeners, epoll, timers, /metrics, ...
MAX_STREAMS = 10_000           # the scale
POOL_MAX = 10_000              # providers[].pool.max_connections is 1-10000 (docs/config.md)
DISTURBED = 0.15              # CPUs of busy time not ours (beyond softirq) that mark a point as disturbed
PLATEAU_SHARE = 0.99           # plateau: samples with in_flight >= 99% of the streams


# ---------------------------------------------------------------------------
# Small pure helpers (unit-tested in test_scale.py).

def hard_nofile() -> Optional[int]:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return None if hard == resource.RLIM_INFINITY else int(hard)


def default_streams(hard: Optional[int]) -> int:
    """The most streams one gateway process can hold open: one fd per client
    connection plus one per upstream connection, under its hard RLIMIT_NOFILE
    minus a margin, and at most the issue's 10,000."""
    if hard is None:
        return MAX_STREAMS
    return max(1, min(MAX_STREAMS, (hard - FD_MARGIN) // 2))


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS, VmHWM, RssAnon, RssFile (KiB) of one process; {} if it is gone."""
    out: dict[str, int] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem", "Threads"):
                out[key] = int(rest.split()[0])
    except (OSError, ValueError, IndexError):
        return {}
    return out


def cpu_s(pids: list[int]) -> float:
    c = ov.cpu_of(pids)
    return c["sched_s"] if c["sched_s"] is not None else c["stat_s"]


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds per thread, keyed 'TID:name' (which thread of the gateway is busy)."""
    out = {}
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
                ns = int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
                out[f"{tid}:{name}"] = ns / 1e9
            except (OSError, ValueError, IndexError):
                continue
    except OSError:
        pass
    return out


def fd_count(pid: int) -> Optional[int]:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def nofile_of(pid: int) -> Optional[tuple[str, str]]:
    """(soft, hard) 'Max open files' of a running process."""
    try:
        for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
            if line.startswith("Max open files"):
                f = line.split()
                return f[3], f[4]
    except (OSError, IndexError):
        pass
    return None


def plateau(samples: list[dict], streams: int, share: float = PLATEAU_SHARE) -> list[dict]:
    """The samples taken while at least share * streams requests were in flight in the gateway."""
    need = share * streams
    return [s for s in samples if s.get("in_flight") is not None and s["in_flight"] >= need
            and s.get("rss_kib") is not None]


def per_stream_kib(baseline_kib: float, plateau_rss_kib: list[float], streams: int) -> Optional[float]:
    """(median plateau RSS - baseline RSS) / streams, KiB."""
    if not plateau_rss_kib or streams <= 0:
        return None
    return (statistics.median(plateau_rss_kib) - baseline_kib) / streams


def stall_verdict(gap: dict, limit_s: float = STALL_GAP_S) -> tuple[int, str]:
    """(streams known stalled, text) from the load generator's gap summary. It
    keeps no per-stream maximum, so the count comes from the overall maximum:
    0 if even the longest gap is within the limit, else at least 1."""
    if not gap or not gap.get("count"):
        return -1, "no gap samples"
    mx = gap["max"] / 1e6
    if mx <= limit_s:
        return 0, f"0 (the longest gap between two events of any stream, {mx:.2f} s, is ≤ {limit_s:g} s)"
    return 1, f"at least 1 (the longest gap is {mx:.2f} s > {limit_s:g} s)"


def fmt(v: Optional[float], digits: int = 1, unit: str = "") -> str:
    return "—" if v is None else f"{v:,.{digits}f}{unit}"


def s_of_us(v: Optional[float]) -> Optional[float]:
    return None if v is None else v / 1e6


# ---------------------------------------------------------------------------
# Part 1: concurrent open streams.

def start_sim(procs: ov.Procs, binary: Path, workdir: Path, cpus: Optional[set[int]], threads: int,
              profile: dict) -> tuple[ov.Child, int]:
    return ov.start_sim_profile(procs, binary, workdir, cpus, profile, threads)


def set_sim_profile(port: int, profile: dict) -> None:
    status, _, body = ov.http_request(port, "PUT", "/admin/profiles/default", json.dumps(profile).encode())
    if status != 200:
        raise BenchError(f"llmgate-sim rejected profile {profile}: {status} {body[:300]!r}")


def gateway_in_flight(port: int, timeout: float = 5.0) -> Optional[int]:
    try:
        status, _, body = ov.http_request(port, "GET", "/metrics", timeout=timeout)
    except (OSError, ov.http.client.HTTPException):
        return None
    m = ov.parse_prometheus(body.decode(errors="replace")) if status == 200 else {}
    if not any(k.partition("{")[0] == "llmgate_requests_in_flight" for k in m):
        return None
    return int(ov.metric_sum(m, "llmgate_requests_in_flight"))


def streams_config(sim_port: int, streams: int, workers: int) -> dict:
    cfg = ov.llmgate_config(sim_port, workers, min(POOL_MAX, streams + 100))
    cfg["server"]["limits"] = {"max_connections": streams + 100}
    return cfg


def run_streams(args, meta: dict, workdir: Path) -> dict:
    n = args.streams
    hard = hard_nofile()
    fit = default_streams(hard)
    stream_s = args.tokens / args.tps
    duration = args.ramp + 2.0
    if stream_s <= duration:
        raise BenchError(f"a stream lasts {stream_s:g} s ({args.tokens} tokens at {args.tps:g}/s): it must outlast "
                         f"the load generator's window (ramp + 2 s = {duration:g} s), or connections would send "
                         f"a second request")
    if n + 100 > POOL_MAX:
        log(f"note: pool.max_connections is capped at {POOL_MAX} (the config's limit); {n} streams need {n}")
    if n > fit:
        log(f"warning: {n} streams need about {2 * n + FD_MARGIN} fds in the gateway; its hard RLIMIT_NOFILE is "
            f"{hard}: expect failures")
    d = workdir / "streams"
    d.mkdir()
    cpus_server = {args.server_cpu} if args.pin else None
    cpus_sim = {args.sim_cpu} if args.pin else None
    procs = ov.Procs(d)
    res: dict = {"streams": n, "hard_nofile": hard, "streams_that_fit": fit, "tokens": args.tokens, "tps": args.tps,
                 "stream_s": stream_s, "ramp_s": args.ramp, "sim_threads": args.sim_threads,
                 "workers": args.stream_workers}
    try:
        fast = {"ttft_ms": 0, "tps": 1e6, "output_tokens": 18}
        slow = {"ttft_ms": 0, "tps": args.tps, "output_tokens": args.tokens}
        res["sim_profile"] = slow
        log(f"[streams] starting llmgate-sim ({args.sim_threads} thread(s)) and llmgate (1 process, "
            f"{args.stream_workers} worker(s)) on CPUs {args.sim_cpu if args.pin else 'any'} and "
            f"{args.server_cpu if args.pin else 'any'} ...")
        sim, sport = start_sim(procs, args.sim, d, cpus_sim, args.sim_threads, fast)
        cfg = streams_config(sport, n, args.stream_workers)
        res["llmgate_config"] = cfg
        gw, gport = ov.start_llmgate(procs, args.gateway, "llmgate", cfg, d, cpus_server, args.log_level)
        gpid, spid = gw.proc.pid, sim.proc.pid
        res["gateway_nofile"] = nofile_of(gpid)
        res["sim_nofile"] = nofile_of(spid)
        ov.verify_target(gport, "stream", "llmgate (streams)")
        ov.verify_target(gport, "nonstream", "llmgate (streams)")
        # Warm-up: a few requests of each kind with the fast profile, so the
        # baseline has the code paths, the router's state and the pool touched.
        for i in range(args.warm_requests):
            for stream in (True, False):
                status, _, _ = ov.http_request(gport, "POST", PATH, ov.request_body(stream), timeout=30)
                if status != 200:
                    raise BenchError(f"warm-up request answered {status}")
        set_sim_profile(sport, slow)
        time.sleep(1.0)
        base = []
        for _ in range(5):
            base.append(proc_status(gpid))
            time.sleep(0.2)
        baseline_kib = statistics.median(b["VmRSS"] for b in base)
        res["baseline"] = {"rss_kib": baseline_kib, "rss_anon_kib": statistics.median(b["RssAnon"] for b in base),
                           "fds": fd_count(gpid), "in_flight": gateway_in_flight(gport),
                           "sim_rss_kib": proc_status(spid).get("VmRSS")}
        sim0 = ov.sim_stats(sport)
        m0 = ov.llmgate_metrics(gport)
        log(f"[streams] baseline RSS {baseline_kib / 1024:.1f} MiB, {res['baseline']['fds']} fds; "
            f"{n} streams of {args.tokens} tokens at {args.tps:g} tokens/s (~{stream_s:.0f} s each), opened over "
            f"{args.ramp:g} s ...")

        body = d / "body-stream.json"
        body.write_bytes(ov.request_body(True))
        out_json = d / "loadgen.json"
        drain = max(args.drain, stream_s + 30)
        argv = [str(args.loadgen), "--url", f"http://{HOST}:{gport}{PATH}", "--body-file", str(body),
                "--connections", str(n), "--ramp", f"{args.ramp:g}", "--warmup", "0", "--duration",
                f"{duration:g}", "--drain", f"{drain:g}", "--json", str(out_json)]
        if args.pin:
            argv += ["--cpu", str(args.loadgen_cpu)]
        res["loadgen_command"] = argv
        lgp = ov.Procs(d)
        lg = lgp.start("loadgen", argv, {args.loadgen_cpu} if args.pin else None)
        t0 = time.monotonic()
        deadline = t0 + duration + drain + 60
        samples: list[dict] = []
        cpu_prev = None
        next_t = t0
        last_log = t0
        while lg.proc.poll() is None:
            if time.monotonic() > deadline:
                raise BenchError("the load generator did not finish in time")
            procs.check_alive()
            # /proc first, all at one instant; then the /metrics scrape, which
            # may wait (it is a new connection through the gateway's accept
            # queue and its one worker): its latency is a stall probe of its own.
            now = time.monotonic()
            st, sst, lst = proc_status(gpid), proc_status(spid), proc_status(lg.proc.pid)
            s = {"t": round(now - t0, 3), "rss_kib": st.get("VmRSS"), "rss_anon_kib": st.get("RssAnon"),
                 "hwm_kib": st.get("VmHWM"), "fds": fd_count(gpid),
                 "sim_rss_kib": sst.get("VmRSS"), "loadgen_rss_kib": lst.get("VmRSS"),
                 "gateway_cpu_s": cpu_s([gpid]), "sim_cpu_s": cpu_s([spid]),
                 "loadgen_cpu_s": cpu_s([lg.proc.pid]), "gateway_threads": thread_cpu(gpid)}
            m0_t = time.monotonic()
            s["in_flight"] = gateway_in_flight(gport, timeout=args.scrape_timeout)
            s["scrape_ms"] = round(1e3 * (time.monotonic() - m0_t), 1)
            samples.append(s)
            if now - last_log >= 5:
                last_log = now
                log(f"    t={s['t']:5.1f} s  in flight {s['in_flight']}  RSS {fmt((s['rss_kib'] or 0) / 1024)} MiB  "
                    f"fds {s['fds']}  /metrics {s['scrape_ms']:.0f} ms")
            # The next slot; slots missed while a scrape waited are skipped, not caught up.
            next_t = max(next_t + args.sample_interval, time.monotonic())
            time.sleep(max(0.0, next_t - time.monotonic()))
        wall = time.monotonic() - t0
        res["samples"] = samples
        res["wall_s"] = wall
        res["loadgen_exit"] = lg.proc.returncode
        res["loadgen_output"] = lgp.log_tail("loadgen", 3000)
        lgp.stop_all()
        try:
            res["loadgen"] = json.loads(out_json.read_text())
        except (OSError, ValueError) as e:
            raise BenchError(f"no JSON from the load generator ({e}); exit {lg.proc.returncode}:\n"
                             f"{res['loadgen_output']}")
        procs.check_alive()
        sim1 = ov.sim_stats(sport)
        m1 = ov.llmgate_metrics(gport)
        res["sim_stats"] = {k: int(sim1[k]) - int(sim0.get(k, 0)) for k in sim1 if k != "in_flight"}
        res["sim_stats"]["in_flight_after"] = int(sim1.get("in_flight", 0))
        res["llmgate_metrics"] = ov.llmgate_delta(m0, m1)
        res["after"] = {"rss_kib": proc_status(gpid).get("VmRSS"), "fds": fd_count(gpid),
                        "in_flight": gateway_in_flight(gport)}
    finally:
        procs.stop_all()
    derive_streams(res)
    return res


def busiest_threads(samples: list[dict], top: int = 3) -> list[tuple[str, float]]:
    """The gateway's threads by CPU seconds over the run (first to last sample)."""
    have = [s for s in samples if s.get("gateway_threads")]
    if len(have) < 2:
        return []
    a, b = have[0]["gateway_threads"], have[-1]["gateway_threads"]
    used = {k: v - a.get(k, 0.0) for k, v in b.items()}
    return sorted(((k, round(v, 3)) for k, v in used.items()), key=lambda kv: -kv[1])[:top]


def derive_streams(res: dict) -> None:
    n = res["streams"]
    samples = res.get("samples") or []
    pl = plateau(samples, n)
    rss = [s["rss_kib"] for s in pl]
    d: dict = {"plateau_samples": len(pl),
               "plateau_t": [pl[0]["t"], pl[-1]["t"]] if pl else None,
               "plateau_rss_kib": statistics.median(rss) if rss else None,
               "kib_per_stream": per_stream_kib(res["baseline"]["rss_kib"], rss, n)}
    anon = [s["rss_anon_kib"] for s in pl if s.get("rss_anon_kib") is not None]
    d["anon_kib_per_stream"] = per_stream_kib(res["baseline"]["rss_anon_kib"], anon, n) if anon else None
    d["peak_rss_kib"] = max([s["rss_kib"] for s in samples if s.get("rss_kib")] or [0]) or None
    d["peak_hwm_kib"] = max([s["hwm_kib"] for s in samples if s.get("hwm_kib")] or [0]) or None
    d["peak_fds"] = max([s["fds"] for s in samples if s.get("fds")] or [0]) or None
    d["peak_in_flight"] = max([s["in_flight"] for s in samples if s.get("in_flight") is not None] or [0])
    d["sim_peak_rss_kib"] = max([s["sim_rss_kib"] for s in samples if s.get("sim_rss_kib")] or [0]) or None
    d["loadgen_peak_rss_kib"] = max([s["loadgen_rss_kib"] for s in samples if s.get("loadgen_rss_kib")] or [0]) or None
    if len(pl) >= 2:
        dt_s = pl[-1]["t"] - pl[0]["t"]
        if dt_s > 0:
            d["plateau_gateway_cores"] = (pl[-1]["gateway_cpu_s"] - pl[0]["gateway_cpu_s"]) / dt_s
            d["plateau_sim_cores"] = (pl[-1]["sim_cpu_s"] - pl[0]["sim_cpu_s"]) / dt_s
            events_per_s = n * res["tps"]
            d["gateway_us_per_event"] = 1e6 * d["plateau_gateway_cores"] / events_per_s
    scrapes = [s["scrape_ms"] for s in samples if s.get("scrape_ms") is not None]
    d["scrape_ms_max"] = max(scrapes) if scrapes else None
    d["scrape_ms_p50"] = statistics.median(scrapes) if scrapes else None
    d["scrapes_failed"] = sum(1 for s in samples if s.get("in_flight") is None)
    d["busiest_threads"] = busiest_threads(samples)
    lg = res.get("loadgen") or {}
    lat = lg.get("latency_us") or {}
    d["stalled"], d["stall_text"] = stall_verdict(lat.get("gap") or {})
    d["events_per_stream"] = lg["events"] / lg["requests"] if lg.get("requests") else None
    d["kib_pass"] = d["kib_per_stream"] is not None and d["kib_per_stream"] <= TARGET_KIB_PER_STREAM
    d["none_dropped"] = (lg.get("requests") == n and lg.get("errors") == 0
                        and res.get("sim_stats", {}).get("streams_aborted", 1) == 0
                        and (res.get("sim_stats", {}).get("streams_cut", 0) == 0))
    d["all_open_at_once"] = d["peak_in_flight"] >= n
    res["derived"] = d


def streams_report(res: dict, args) -> list[str]:
    n, d = res["streams"], res["derived"]
    lg = res.get("loadgen") or {}
    lat = lg.get("latency_us") or {}
    gap, ttft, total = lat.get("gap") or {}, lat.get("ttft") or {}, lat.get("total") or {}
    L = ["## 1. Concurrent open streams through one gateway process", ""]
    hard = res["hard_nofile"]
    if n < MAX_STREAMS:
        why = (f"**{n:,} streams, not {MAX_STREAMS:,}**: " if n == res["streams_that_fit"] else
               f"**{n:,} streams** (`--streams`; {res['streams_that_fit']:,} fit this machine): ")
        L += [why + f"the gateway holds one fd per client connection and one per upstream connection, and the hard "
              f"`RLIMIT_NOFILE` here is {hard:,} — raising it needs `CAP_SYS_RESOURCE`, which this environment "
              f"does not grant even to root (`prlimit --nofile=30000` fails). The most that fit is "
              f"({hard:,} − {FD_MARGIN}) // 2 = {res['streams_that_fit']:,}. The benchmark raises the soft limit "
              f"of every process it starts to the hard limit (not globally).", ""]
    cfg = res["llmgate_config"]
    L += [f"- upstream: llmgate-sim, {res['sim_threads']} thread(s), profile `{ov._compact(res['sim_profile'])}` "
          f"(role chunk at once, then a token every {1 / res['tps']:g} s: each stream stays open "
          f"~{res['stream_s']:.0f} s); warm-up requests used `tps: 1e6`",
          f"- llmgate: one process, `server.workers: {res['workers']}`, `server.limits.max_connections: "
          f"{cfg['server']['limits']['max_connections']}`, `pool.max_connections: "
          f"{cfg['providers'][0]['pool']['max_connections']}`, `--log-level {args.log_level}`, "
          f"`--watch-interval 0`; open files limit (soft, hard) = {res.get('gateway_nofile')}",
          f"- load: `llmgate-loadgen --stream --connections {n} --ramp {res['ramp_s']:g}` (one stream per connection, "
          f"opened evenly over {res['ramp_s']:g} s; no connection sends a second request), every stream recorded",
          f"- pinning: " + (f"llmgate alone on CPU {args.server_cpu}; the load generator (and this runner) on CPU "
                            f"{args.loadgen_cpu}; llmgate-sim on CPU {args.sim_cpu}" if args.pin else "none"),
          f"- sampled every {args.sample_interval:g} s: llmgate VmRSS (/proc/PID/status), its fds (/proc/PID/fd), "
          f"`llmgate_requests_in_flight` (/metrics). Baseline = after {args.warm_requests} streamed + "
          f"{args.warm_requests} non-streamed warm-up requests, before the ramp. Plateau = samples with in flight ≥ "
          f"{100 * PLATEAU_SHARE:g}% of {n:,}. RSS per stream = (median plateau RSS − baseline) / {n:,}.", ""]
    kib = d["kib_per_stream"]
    status = "PASS" if d["kib_pass"] else "MISS"
    L += ["| measure | value |", "|---|---:|",
          f"| streams requested / completed / errors | {n:,} / {lg.get('requests', '—'):,} / {lg.get('errors', '—')} |",
          f"| peak in flight in llmgate | {d['peak_in_flight']:,} |",
          f"| plateau (≥ {100 * PLATEAU_SHARE:g}% in flight) | {d['plateau_samples']} samples, t = "
          + (f"{d['plateau_t'][0]:.1f}–{d['plateau_t'][1]:.1f} s" if d["plateau_t"] else "—") + " |",
          f"| llmgate RSS baseline | {fmt(res['baseline']['rss_kib'] / 1024)} MiB |",
          f"| llmgate RSS plateau (median) | {fmt(d['plateau_rss_kib'] / 1024 if d['plateau_rss_kib'] else None)} MiB |",
          f"| llmgate RSS peak (sampled / VmHWM) | {fmt((d['peak_rss_kib'] or 0) / 1024)} / "
          f"{fmt((d['peak_hwm_kib'] or 0) / 1024)} MiB |",
          f"| **RSS per open stream** | **{fmt(kib, 2)} KiB** |",
          f"| of which anonymous memory (RssAnon) | {fmt(d['anon_kib_per_stream'], 2)} KiB |",
          f"| llmgate RSS after the run | {fmt((res['after']['rss_kib'] or 0) / 1024)} MiB |",
          f"| llmgate fds: baseline / peak / after | {res['baseline']['fds']} / {d['peak_fds']} / "
          f"{res['after']['fds']} |",
          f"| llmgate CPU on the plateau | {fmt(d.get('plateau_gateway_cores'), 3)} cores for ~{n * res['tps']:,.0f} "
          f"events/s ({fmt(d.get('gateway_us_per_event'), 1)} µs per event) |",
          f"| llmgate-sim RSS peak / CPU on the plateau | {fmt((d['sim_peak_rss_kib'] or 0) / 1024)} MiB / "
          f"{fmt(d.get('plateau_sim_cores'), 3)} cores |",
          f"| llmgate-loadgen RSS peak / CPU over the run | {fmt((d['loadgen_peak_rss_kib'] or 0) / 1024)} MiB / "
          f"{fmt(lg.get('loadgen_cpu_s'), 1)} s |",
          f"| llmgate CPU by thread over the run (busiest) | "
          + (", ".join(f"`{k}` {v:.1f} s" for k, v in d.get("busiest_threads") or []) or "—") + " |",
          f"| `/metrics` scrape latency p50 / max; scrapes timed out (> {args.scrape_timeout:g} s) | "
          f"{fmt(d.get('scrape_ms_p50'), 1)} / {fmt(d.get('scrape_ms_max'), 0)} ms; {d.get('scrapes_failed')} |",
          f"| SSE events per stream (role, tokens, finish, usage, [DONE]) | {fmt(d['events_per_stream'], 2)} |",
          f"| gap between events p50 / p99 / p99.9 / max | {fmt(s_of_us(gap.get('p50')), 3)} / "
          f"{fmt(s_of_us(gap.get('p99')), 3)} / {fmt(s_of_us(gap.get('p999')), 3)} / "
          f"{fmt(s_of_us(gap.get('max')), 3)} s |",
          f"| TTFT p50 / p99 / max | {fmt(ttft.get('p50'), 0)} / {fmt(ttft.get('p99'), 0)} / "
          f"{fmt(ttft.get('max'), 0)} µs |",
          f"| stream duration p50 / max | {fmt(s_of_us(total.get('p50')), 2)} / {fmt(s_of_us(total.get('max')), 2)} s |",
          f"| llmgate requests by outcome (delta) | "
          + (", ".join(f"{k} {v}" for k, v in sorted(res['llmgate_metrics'].get('requests', {}).items())) or "—")
          + " |",
          f"| llmgate-sim: streams completed / aborted / cut | {res['sim_stats'].get('streams_completed')} / "
          f"{res['sim_stats'].get('streams_aborted')} / {res['sim_stats'].get('streams_cut')} |",
          ""]
    L += ["| check | value | target | result |", "|---|---|---|---|",
          f"| RSS per open stream at {n:,} streams | {fmt(kib, 2)} KiB | ≤ {TARGET_KIB_PER_STREAM:g} KiB | "
          f"**{status}** |",
          f"| all streams open at once | peak {d['peak_in_flight']:,} in flight | {n:,} | "
          f"**{'PASS' if d['all_open_at_once'] else 'MISS'}** |",
          f"| none dropped | {lg.get('requests', 0) - lg.get('errors', 0):,} completed with `[DONE]`, "
          f"{lg.get('errors', '—')} errors "
          f"{json.dumps(lg.get('error_kinds') or {})}, sim aborted {res['sim_stats'].get('streams_aborted')} | "
          f"{n:,} completed, 0 errors | **{'PASS' if d['none_dropped'] else 'MISS'}** |",
          f"| none stalled (gap > {STALL_GAP_S:g} s) | stalled streams: {d['stall_text']} | 0 | "
          f"**{'PASS' if d['stalled'] == 0 else 'MISS'}** |", ""]
    if n < MAX_STREAMS:
        L += [f"The target is stated at {MAX_STREAMS:,} streams; this run holds {n:,} (see above).", ""]
    # A compact timeline.
    L += ["Timeline (every ~5 s; CPU % over the preceding interval):", "",
          "| t s | in flight | llmgate RSS MiB | fds | llmgate CPU % | sim CPU % | loadgen CPU % | /metrics ms | "
          "sim RSS MiB |",
          "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    samples = res.get("samples") or []
    prev = None
    for s in samples:
        if prev is not None and s["t"] - prev["t"] < 4.9 and s is not samples[-1]:
            continue
        def pct(key: str) -> Optional[float]:
            if prev is None or s["t"] <= prev["t"] or s.get(key) is None or prev.get(key) is None:
                return None
            return 100 * (s[key] - prev[key]) / (s["t"] - prev["t"])
        L.append(f"| {s['t']:.1f} | {s['in_flight'] if s['in_flight'] is not None else 'timeout'} | "
                 f"{fmt((s['rss_kib'] or 0) / 1024)} | {s['fds']} | {fmt(pct('gateway_cpu_s'), 0)} | "
                 f"{fmt(pct('sim_cpu_s'), 0)} | {fmt(pct('loadgen_cpu_s'), 0)} | {fmt(s.get('scrape_ms'), 0)} | "
                 f"{fmt((s['sim_rss_kib'] or 0) / 1024)} |")
        prev = s
    L.append("")
    return L


# ---------------------------------------------------------------------------
# Part 2: worker scaling (static nginx upstream, closed loop).

@dataclass
class Config:
    id: str              # "llmgate-w1"
    target: str          # "direct" | "nginx" | "llmgate" (run_point's target names)
    label: str           # "llmgate, server.workers 1"
    workers: int
    proxy_cpus: Optional[set[int]]
    ports: dict          # kind -> port
    pids: object         # () -> list[int]
    llmgate_port: int = 0


def cpus_text(c: Optional[set[int]]) -> str:
    return "—" if not c else ",".join(str(x) for x in sorted(c))


def run_workers(args, meta: dict, workdir: Path) -> dict:
    d = workdir / "workers"
    d.mkdir()
    os.chmod(d, 0o755)  # nginx workers run as nobody
    for kind in ov.KINDS:
        (d / f"body-{kind}.json").write_bytes(ov.request_body(kind == "stream"))
    lg_cpu, srv_cpu = args.loadgen_cpu, args.server_cpu
    both = {lg_cpu, srv_cpu}
    oargs = argparse.Namespace(nginx=args.nginx, gateway=args.gateway, sim=args.sim, loadgen=args.loadgen,
                               server_cpu=srv_cpu, loadgen_cpu=lg_cpu, llmgate_workers=1, llmgate_pool=1024,
                               llmgate_log_level=args.log_level, duration=args.w_duration, warmup=args.w_warmup)
    procs = ov.Procs(d)
    res: dict = {"connections": args.w_connections, "duration_s": args.w_duration, "warmup_s": args.w_warmup,
                 "configs": [], "points": []}
    try:
        log(f"[workers] starting the static upstream, nginx (1 worker) and llmgate (1 worker) on CPU {srv_cpu} ...")
        g = ov.setup_static(procs, oargs, d)  # upstream + nginx proxy + llmgate(workers 1), all on srv_cpu
        jp, sp = g.urls[("direct", "nonstream")], g.urls[("direct", "stream")]
        configs = [Config("direct", "direct", "upstream alone (reference)", 0, None,
                          {"nonstream": jp, "stream": sp}, lambda: [], g.llmgate_port)]
        if not args.no_nginx:
            configs.append(Config("nginx-w1", "nginx", "nginx, worker_processes 1", 1, {srv_cpu},
                                  {k: g.urls[("nginx", k)] for k in ov.KINDS}, g.pids["nginx"], g.llmgate_port))
        configs.append(Config("llmgate-w1", "llmgate", "llmgate, server.workers 1", 1, {srv_cpu},
                              {k: g.llmgate_port for k in ov.KINDS}, g.pids["llmgate"], g.llmgate_port))
        # Two-worker instances: llmgate and nginx get both CPUs (the load generator's too).
        log(f"[workers] starting nginx (2 workers) and llmgate (2 workers) on CPUs {cpus_text(both)} ...")
        if not args.no_nginx:
            d2 = d / "nginx-w2"
            d2.mkdir()
            os.chmod(d2, 0o755)
            (d2 / "proxy-tmp").mkdir()  # proxy_nginx_conf's temp paths (start_nginx makes NAME-tmp)
            pj, ps = ov.free_port(), ov.free_port()
            conf = ov.proxy_nginx_conf(d2, [(pj, jp), (ps, sp)])
            if "worker_processes 1;" not in conf:
                raise BenchError("bench/overhead's nginx config no longer says `worker_processes 1;`")
            conf = conf.replace("worker_processes 1;", "worker_processes 2;")
            px2 = ov.start_nginx(procs, args.nginx, "proxy-w2", conf, d2, both)
            ov.wait_until("nginx proxy (2 workers)",
                          lambda: ov.http_request(pj, "POST", PATH, ov.request_body(False))[0] == 200, procs)
            g.configs["nginx proxy, 2 workers"] = conf
            configs.append(Config("nginx-w2", "nginx", "nginx, worker_processes 2", 2, both,
                                  {"nonstream": pj, "stream": ps}, lambda: ov.proc_tree(px2.proc.pid),
                                  g.llmgate_port))
        cfg2 = ov.llmgate_config(sp, 2, 1024)
        lg2, lport2 = ov.start_llmgate(procs, args.gateway, "llmgate-w2", cfg2, d, both, args.log_level)
        configs.append(Config("llmgate-w2", "llmgate", "llmgate, server.workers 2", 2, both,
                              {k: lport2 for k in ov.KINDS}, lambda: [lg2.proc.pid], lport2))
        res["llmgate_configs"] = {"workers 1": g.llmgate_config, "workers 2": cfg2}
        res["nginx_configs"] = g.configs
        for c in configs:
            for kind in ov.KINDS:
                ov.verify_target(c.ports[kind], kind, c.id)
            res["configs"].append({"id": c.id, "target": c.target, "label": c.label, "workers": c.workers,
                                   "proxy_cpus": sorted(c.proxy_cpus) if c.proxy_cpus else None})
        load = ov.Load(f"closed{args.w_connections}", f"closed {args.w_connections}",
                       connections=args.w_connections)
        total = len(configs) * len(ov.KINDS)
        i = 0
        for kind in ov.KINDS:
            for c in configs:
                i += 1
                view = ov.Group("static", g.description,
                                urls={(c.target, kind): c.ports[kind]},
                                pids={"upstream": g.pids["upstream"], **({c.target: c.pids} if c.target != "direct"
                                                                        else {})},
                                counters=g.counters, in_flight=g.in_flight, llmgate_port=c.llmgate_port)
                pt = ov.Point("static", kind, load, c.target)
                log(f"[{i}/{total}] {kind} {c.id} ...")
                k0 = stat_fields(sorted(both))
                r = ov.run_point(pt, view, procs, oargs, d)
                r["kernel_cpus"] = kernel_cpus(k0, stat_fields(sorted(both)), len(both))
                r["config"] = c.id
                r["id"] = f"workers/{kind}/{c.id}"
                res["points"].append(r)
                lgj = r.get("loadgen") or {}
                log(f"    {fmt(lgj.get('rate'))} req/s, {lgj.get('errors', '?')} errors"
                    + (f"; {r['failure']}" if r.get("failure") else ""))
                time.sleep(0.5)
    finally:
        procs.stop_all()
    return res


def stat_fields(cpus: list[int]) -> dict[str, int]:
    """Clock ticks of these CPUs from /proc/stat, summed: softirq, irq, steal, total."""
    out = {"softirq": 0, "irq": 0, "steal": 0, "total": 0}
    want = {f"cpu{c}" for c in cpus}
    for line in Path("/proc/stat").read_text().splitlines():
        f = line.split()
        if f and f[0] in want:
            v = [int(x) for x in f[1:]]
            out["irq"] += v[5]
            out["softirq"] += v[6]
            out["steal"] += v[7] if len(v) > 7 else 0
            out["total"] += sum(v[:8])
    return out


def kernel_cpus(before: dict, after: dict, ncpus: int) -> dict[str, Optional[float]]:
    """CPUs' worth of softirq (the kernel's network stack: loopback TCP is processed
    there and billed to no process), hard irq and steal time between two stat_fields()."""
    total = after["total"] - before["total"]
    if total <= 0:
        return {"softirq": None, "irq": None, "steal": None}
    return {k: ncpus * (after[k] - before[k]) / total for k in ("softirq", "irq", "steal")}


def other_work(r: dict) -> Optional[float]:
    """CPUs' worth of busy time on the two CPUs not billed to the load
    generator, the upstream or the proxy (other processes, this runner,
    kernel softirq work)."""
    busy = [r["core_busy"].get(k) for k in ("loadgen", "server")]
    wall, lg = r.get("wall_s"), r.get("loadgen_cpu_share")
    if None in busy or not wall or lg is None:
        return None
    ours = sum(c["s"] for c in r["cpu"].values()) / wall
    return max(0.0, sum(busy) - lg - ours)


def point_notes(r: dict) -> list[str]:
    notes = []
    lg = r.get("loadgen") or {}
    if r.get("failure"):
        notes.append("FAILED")
    if lg.get("errors"):
        notes.append("errors")
    if r.get("unsettled"):
        notes.append("previous point not drained")
    if (r.get("loadgen_cpu_share") or 0) > 0.9:
        notes.append("loadgen-bound")
    ow, sirq = other_work(r), (r.get("kernel_cpus") or {}).get("softirq")
    if ow is not None and sirq is not None and ow - sirq > DISTURBED:
        notes.append(f"disturbed: {ow - sirq:.2f} CPUs of work not ours")
    return notes


def workers_report(res: dict, args) -> list[str]:
    lg_cpu, srv_cpu = args.loadgen_cpu, args.server_cpu
    L = ["## 2. Throughput from 1 to 2 worker threads", "",
         f"Closed loop, {res['connections']} keep-alive connections, {res['warmup_s']:g} s warmup + "
         f"{res['duration_s']:g} s measured per point, against bench/overhead's static nginx upstream (fixed "
         f"chat.completion / 22-event stream from memory; llmgate always asks it for the stream). The machine has "
         f"{os.cpu_count()} CPUs, so the load generator shares them: it runs on CPU {lg_cpu}, the upstream on CPU "
         f"{srv_cpu}. With 1 worker the proxy runs on CPU {srv_cpu} (with the upstream); with 2 workers the proxy "
         f"may run on both CPUs, **so it competes with the load generator for CPU {lg_cpu}**: read the 2-worker "
         f"rows as \"what two workers get out of this box\", not as a clean 2× measurement.", "",
         "CPU µs/req = the proxy's CPU time (all threads; nginx master + workers) / upstream requests in the point "
         "(warmup included in both). *proxy cores* = that CPU time / wall time. *CPU n busy* = busy share of that "
         "CPU over the point (everything on it). *loadgen* = the load generator's CPU time / wall time; near 100% "
         "means the load generator, not the proxy, sets the throughput. *softirq* = CPUs' worth of softirq time on "
         "the two CPUs (/proc/stat): the kernel's network stack, where loopback TCP is processed, billed to no "
         "process. *other work* = busy time on both CPUs not billed to the load generator, the upstream or the "
         "proxy, in CPUs: mostly that softirq time; where other work minus softirq is above "
         f"{DISTURBED:g} the row is marked *disturbed* (other processes ran). *speedup* = req/s over the same proxy's 1-worker req/s.", ""]
    by = {(r["kind"], r["config"]): r for r in res["points"]}
    cfgs = res["configs"]
    for kind in ov.KINDS:
        L += [f"### {'streamed' if kind == 'stream' else 'non-streamed'}", "",
              "| proxy | CPUs: loadgen / proxy / upstream | req/s | errors | p50 µs | p99 µs | proxy CPU µs/req | "
              "proxy cores | upstream CPU µs/req | "
              f"CPU {lg_cpu} busy | CPU {srv_cpu} busy | loadgen | softirq | other work | speedup | notes |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
        for c in cfgs:
            r = by.get((kind, c["id"]))
            if r is None:
                continue
            lg = r.get("loadgen") or {}
            t = c["target"]
            pc = r["cpu"].get(t) if t != "direct" else None
            cores = pc["s"] / r["wall_s"] if pc and r.get("wall_s") else None
            base_id = c["id"].replace("-w2", "-w1")
            base = by.get((kind, base_id))
            speed = (lg.get("rate") / base["loadgen"]["rate"]
                     if c["id"].endswith("-w2") and base and base.get("loadgen") and base["loadgen"].get("rate")
                     and lg.get("rate") else None)
            proxy_cpus = cpus_text(set(c["proxy_cpus"])) if c["proxy_cpus"] else "—"
            L.append("| " + " | ".join([
                c["label"], f"{lg_cpu} / {proxy_cpus} / {srv_cpu}", fmt(lg.get("rate")),
                str(lg.get("errors", "—")), fmt(ov.lat(r, "total", "p50"), 0), fmt(ov.lat(r, "total", "p99"), 0),
                fmt(pc.get("us_per_request") if pc else None), fmt(cores, 2),
                fmt(r["cpu"]["upstream"].get("us_per_request")),
                ov.fmt_pct(r["core_busy"].get("loadgen")), ov.fmt_pct(r["core_busy"].get("server")),
                ov.fmt_pct(r.get("loadgen_cpu_share")), fmt((r.get("kernel_cpus") or {}).get("softirq"), 2),
                fmt(other_work(r), 2),
                (f"{speed:.2f}×" if speed else ""), ", ".join(point_notes(r))]) + " |")
        L.append("")
    failed = [r for r in res["points"] if r.get("failure") or (r.get("loadgen") or {}).get("errors")]
    for r in failed:
        lg = r.get("loadgen") or {}
        L.append(f"- {r['id']}: " + (r.get("failure") or f"{lg.get('errors')} errors "
                                     f"{json.dumps(lg.get('error_kinds') or {})}"))
    if failed:
        L.append("")
    return L


# ---------------------------------------------------------------------------
# Main.

def parse_args(argv: list[str]):
    ap = argparse.ArgumentParser(description="llmgate scale benchmarks (see bench/scale/README.md).")
    ap.add_argument("what", nargs="?", default="all", choices=["all", "streams", "workers"],
                    help="all (default: streams, then workers), streams, or workers")
    g = ap.add_argument_group("streams")
    g.add_argument("--streams", type=int,
                   help="open streams (default: (hard RLIMIT_NOFILE - 64) // 2, at most 10000)")
    g.add_argument("--tokens", type=int, default=40, help="tokens per stream (default 40)")
    g.add_argument("--tps", type=float, default=1.0, help="tokens per second per stream (default 1)")
    g.add_argument("--ramp", type=float, default=10.0, help="seconds over which the streams are opened (default 10)")
    g.add_argument("--drain", type=float, default=120.0,
                   help="load generator --drain, s (default 120; at least stream length + 30)")
    g.add_argument("--sim-threads", type=int, default=1, help="llmgate-sim threads (default 1)")
    g.add_argument("--stream-workers", type=int, default=1, help="llmgate server.workers for this part (default 1)")
    g.add_argument("--warm-requests", type=int, default=10,
                   help="warm-up requests of each kind before the baseline (default 10)")
    g.add_argument("--sample-interval", type=float, default=0.5, help="sampling period, s (default 0.5)")
    g.add_argument("--scrape-timeout", type=float, default=2.0,
                   help="timeout of each /metrics scrape, s (default 2; a timed-out scrape is a sample without "
                        "in-flight count)")
    g.add_argument("--sim-cpu", type=int,
                   help="llmgate-sim's CPU (default: the load generator's, so the gateway has its CPU to itself)")
    w = ap.add_argument_group("workers")
    w.add_argument("--connections", dest="w_connections", type=int, default=64,
                   help="closed-loop connections (default 64)")
    w.add_argument("--duration", dest="w_duration", type=float, default=10.0, help="measured s per point (default 10)")
    w.add_argument("--warmup", dest="w_warmup", type=float, default=1.0, help="warmup s per point (default 1)")
    w.add_argument("--no-nginx", action="store_true", help="skip the nginx reference rows")
    c = ap.add_argument_group("common")
    c.add_argument("--loadgen-cpu", type=int, default=0, help="the load generator's CPU (default 0)")
    c.add_argument("--server-cpu", type=int, default=1, help="the servers' CPU (default 1)")
    c.add_argument("--no-pin", dest="pin", action="store_false", help="streams: pin nothing")
    c.add_argument("--log-level", default="warn", choices=["debug", "info", "warn", "error"],
                   help="llmgate --log-level (default warn)")
    c.add_argument("--bin-dir", default=str(REPO / "build" / "bin"))
    c.add_argument("--loadgen")
    c.add_argument("--gateway")
    c.add_argument("--sim")
    c.add_argument("--nginx", help="nginx binary (default: the installed one; apt-get installs it if missing)")
    c.add_argument("--no-install", action="store_true", help="never apt-get install nginx")
    c.add_argument("--out", default=str(HERE / "results"), help="results directory (default bench/scale/results)")
    c.add_argument("--keep-tmp", action="store_true", help="keep the temporary directory (configs, logs)")
    args = ap.parse_args(argv)
    if args.streams is None:
        args.streams = default_streams(hard_nofile())
    if args.sim_cpu is None:
        args.sim_cpu = args.loadgen_cpu
    if args.streams < 1:
        ap.error("--streams must be at least 1")
    return args


def run(args, command: str) -> int:
    ncpu = os.cpu_count() or 1
    for cpu in (args.loadgen_cpu, args.server_cpu, args.sim_cpu):
        if cpu >= ncpu:
            raise BenchError(f"CPU {cpu} does not exist ({ncpu} CPUs)")
    bin_dir = Path(args.bin_dir)
    args.loadgen = Path(args.loadgen or bin_dir / "llmgate-loadgen").resolve()
    args.gateway = Path(args.gateway or bin_dir / "llmgate").resolve()
    args.sim = Path(args.sim or bin_dir / "llmgate-sim").resolve()
    for b in (args.loadgen, args.gateway, args.sim):
        if not os.access(b, os.X_OK):
            raise BenchError(f"{b}: not an executable (build it, or pass --bin-dir / --loadgen / --gateway / --sim)")
    if args.what in ("all", "workers"):
        args.nginx = ov.find_nginx(args.nginx, not args.no_install)
    try:
        os.sched_setaffinity(0, {args.loadgen_cpu})  # this runner stays off the server CPU
    except OSError:
        pass
    now = dt.datetime.now().astimezone()
    stamp = now.strftime("%Y-%m-%d_%H%M%S")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    md_path, json_path = out_dir / f"{stamp}.md", out_dir / f"{stamp}.json"
    workdir = Path(tempfile.mkdtemp(prefix="llmgate-scale-"))
    os.chmod(workdir, 0o755)
    idle = ov.idle_check(sorted({args.loadgen_cpu, args.server_cpu}))
    warnings = [f"CPU {c} was {100 * b:.0f}% busy before the run" for c, b in idle.items() if b and b > 0.10]
    for w in warnings:
        log(f"warning: {w}: other work on the machine will disturb the numbers")
    meta = {"date": now.isoformat(timespec="seconds"), "command": command,
            "machine": {"cpu": ov.lscpu_model(), "cpus": ncpu, "kernel": platform.release(),
                        "host": platform.node(), "python": platform.python_version(),
                        "mem_total_mib": mem_total_mib(), "git": ov.git_info(),
                        "loadavg_at_start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
                        "busy_before_run": {str(c): b for c, b in idle.items()},
                        "nofile_hard": hard_nofile(),
                        "nginx": ov.nginx_version(args.nginx) if args.nginx else None},
            "binaries": {"llmgate": f"{args.gateway} (built {ov.mtime(args.gateway)})",
                         "llmgate-loadgen": f"{args.loadgen} (built {ov.mtime(args.loadgen)})",
                         "llmgate-sim": f"{args.sim} (built {ov.mtime(args.sim)})"},
            "warnings": warnings}
    out: dict = {"meta": meta}
    errors: list[tuple[str, BenchError]] = []
    try:
        # A part that fails is reported as such; the other part still runs.
        for part, fn in (("streams", run_streams), ("workers", run_workers)):
            if args.what not in ("all", part):
                continue
            try:
                out[part] = fn(args, meta, workdir)
            except BenchError as e:
                errors.append((part, e))
                log(f"error ({part}): {e}")
    finally:
        md = report(out, args, [f"{part}: {e}" for part, e in errors])
        md_path.write_text(md)
        json_path.write_text(json.dumps(out, indent=1, default=list) + "\n")
        if args.keep_tmp:
            log(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    print(md, flush=True)
    log(f"report: {md_path}\nraw:    {json_path}")
    return errors[0][1].code if errors else ov.EXIT_OK


def mem_total_mib() -> Optional[int]:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    except (OSError, ValueError):
        pass
    return None


def report(out: dict, args, errors: list[str]) -> str:
    meta = out["meta"]
    m = meta["machine"]
    L = ["# llmgate scale", "",
         f"- date: {meta['date']}",
         f"- machine: {m['cpu']}, {m['cpus']} CPUs, {m['mem_total_mib']} MiB RAM, Linux {m['kernel']}, {m['host']}; "
         f"load average at start {m['loadavg_at_start']}; hard RLIMIT_NOFILE {m['nofile_hard']}",
         f"- repository at {m['git']}; Python {m['python']}" + (f"; nginx {m['nginx']}" if m.get("nginx") else ""),
         f"- binaries: " + "; ".join(f"{k} {v}" for k, v in meta["binaries"].items()),
         f"- command: `{meta['command']}`", ""]
    for w in meta.get("warnings", []):
        L.append(f"**warning**: {w}")
    for e in errors:
        L.append(f"**error**: {e}")
    if meta.get("warnings") or errors:
        L.append("")
    if out.get("streams") and out["streams"].get("derived"):
        L += streams_report(out["streams"], args)
    if out.get("workers") and out["workers"].get("points"):
        L += workers_report(out["workers"], args)
    configs = []
    if out.get("streams") and out["streams"].get("llmgate_config"):
        configs.append(("llmgate config (streams)", out["streams"]["llmgate_config"]))
    for name, cfg in ((out.get("workers") or {}).get("llmgate_configs") or {}).items():
        configs.append((f"llmgate config (workers scaling, {name})", cfg))
    if configs:
        L += ["## Configurations", ""]
        for name, cfg in configs:
            L += [f"<details><summary>{name}</summary>", "", "```yaml",
                  ov.yaml.safe_dump(cfg, sort_keys=False).rstrip(), "```", "", "</details>", ""]
        for name, text in ((out.get("workers") or {}).get("nginx_configs") or {}).items():
            L += [f"<details><summary>{name} config</summary>", "", "```nginx", text.rstrip(), "```", "",
                  "</details>", ""]
    return "\n".join(L)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    command = " ".join(shlex.quote(a) for a in ["python3", os.path.relpath(sys.argv[0])] + argv)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, ov._on_signal)
    try:
        return run(args, command)
    except KeyboardInterrupt:
        log("interrupted: stopped every process this run started")
        return ov.EXIT_INTERRUPTED
    except BenchError as e:
        log(f"error: {e}")
        return e.code
    finally:
        ov._kill_leftovers()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
