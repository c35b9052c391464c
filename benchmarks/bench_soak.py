"""Soak: the real agent (`perdix run`) against the simulator exporter at 10x speed and a real Prometheus.

Parts: `perdix simulate --serve-metrics --speed 10 --follow-scale-target` (the simulated job, following
the Deployment's replicas), Prometheus scraping it every second, the loopback Kubernetes fake from
tests/fakes (scale subresource, Events, knowledge ConfigMap), and `perdix run` (not dry-run) as a
subprocess. The workload is a synthetic trace of daily-like waves with steps, so the agent keeps
rescaling up and down for the whole run.

Reported: the agent's RSS sampled every ``--sample-s`` seconds (start after warm-up, end, max, and the
least-squares slope in MiB/hour over the samples after warm-up), the loop latency p50/p95 from the
agent's own ``perdix_loop_duration_seconds`` histogram, rounds, rescales, and every error counter
(round failures by step, monitor errors by kind, executor errors by kind, error-level log lines).
Memory must stay flat: the slope is the figure to watch.

Run: .venv/bin/python -m benchmarks.bench_soak [--minutes 20] [--speed 10] [--sample-s 10]
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from tests.e2e.test_run_kubernetes import PERDIX, Process
from tests.fakes.kube_api import FakeKubeAPI
from tests.fixtures.prometheus import PrometheusServer, free_port, http_get, poll

TASKMANAGERS = "flink-taskmanager"
INITIAL = 3
WORKER_RPS = 1000.0
WARMUP_S = 120.0
"""RSS samples before this many wall seconds are start-up (imports, first fits), not growth."""


def simulator_settings(speed: float) -> dict[str, Any]:
    """The e2e job, its simulated times stretched by ``speed`` so the agent sees the e2e job's wall times."""
    return {
        "partitions": 12,
        "initial_parallelism": INITIAL,
        "worker_capacity_rps": WORKER_RPS,
        "metric_window_s": max(1, round(2 * speed)),
        "cpu_noise": 0.04,
        "rescale_downtime_base_s": 2.0 * speed,
        "rescale_downtime_per_worker_s": 0.2 * speed,
        "failure_downtime_base_s": 2.0 * speed,
        "failure_downtime_per_worker_s": 0.1 * speed,
        "checkpoint_interval_s": max(1, round(5 * speed)),
        "seed": 23,
    }


def write_trace(path: Path, simulated_s: float, speed: float) -> Path:
    """Waves between 30 % and 160 % of the initial capacity, one every 8 wall minutes, with a burst in the trough."""
    period = 480.0 * speed
    capacity = INITIAL * WORKER_RPS
    rows = []
    for t in np.arange(0.0, simulated_s + 60 * speed, 10.0):  # one row per simulated 10 s
        phase = (t % period) / period
        level = 0.95 + 0.65 * math.sin(2 * math.pi * phase)
        if 0.55 <= phase < 0.65:  # a short burst in the trough
            level += 0.5
        rows.append((int(t), max(0.1, level) * capacity))
    path.write_text("time_s,rate\n" + "".join(f"{t},{r:.1f}\n" for t, r in rows))
    return path


def agent_settings(prometheus: PrometheusServer, kubeconfig: Path, port: int) -> dict[str, Any]:
    """The e2e agent's settings, not dry-run."""
    return {
        "dry_run": False,
        "loop_interval_s": 2,
        "min_parallelism": 1,
        "max_parallelism": 12,
        "target_recovery_time_s": 60,
        "grace_period_s": 15,
        "recent_rescale_window_s": 30,
        # Shorter than the waves' troughs, so the agent scales in as well as out during the soak.
        "scale_down_stabilization_s": 90,
        "checkpoint_interval_s": 5,
        "downtime_rescale_prior_s": 3,
        "downtime_failure_prior_s": 2,
        "forecast_window_s": 60,
        "forecast_horizon_s": 60,
        "prometheus": {
            "url": prometheus.url,
            "timeout_s": 2,
            "stale_after_s": 10,
            "queries": {"cpu": "avg(flink_taskmanager_Status_JVM_CPU_Load) by ({worker_label})"},
        },
        "scale_target": {
            "kind": "deployment",
            "name": TASKMANAGERS,
            "namespace": "default",
            "kubeconfig": str(kubeconfig),
            "request_timeout_s": 2,
        },
        "knowledge": {"store": "configmap", "configmap": "perdix-knowledge"},
        "telemetry": {
            "metrics_host": "127.0.0.1",
            "metrics_port": port,
            "not_ready_after_failed_loops": 2,
            "log_format": "json",
            "log_level": "info",
        },
    }


def rss_mib(pid: int) -> float | None:
    """Resident set size of a process, MiB (None once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def samples(port: int) -> dict[str, float]:
    """Every sample of the agent's /metrics, keyed by name{labels}."""
    status, body = http_get(f"http://127.0.0.1:{port}/metrics")
    out: dict[str, float] = {}
    if status != 200:
        return out
    for line in body.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


def histogram_quantile(metrics: dict[str, float], name: str, q: float) -> float:
    """Upper bound of the bucket holding the q-quantile (Prometheus' histogram_quantile without interpolation)."""
    buckets = sorted(
        (float(key.split('le="', 1)[1].split('"', 1)[0]), count)
        for key, count in metrics.items()
        if key.startswith(name + "_bucket{")
    )
    total = buckets[-1][1] if buckets else 0.0
    for bound, count in buckets:
        if total and count >= q * total:
            return bound
    return math.nan


def labelled(metrics: dict[str, float], name: str) -> dict[str, float]:
    """The samples of one counter family by label set."""
    return {key[len(name) :]: value for key, value in metrics.items() if key.startswith(name + "{") and value}


def main() -> None:
    """Run the soak and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=20.0, help="wall minutes of the soak (default 20)")
    parser.add_argument("--speed", type=float, default=10.0, help="simulated seconds per wall second (default 10)")
    parser.add_argument("--sample-s", type=float, default=10.0, help="RSS and /metrics sampling interval, wall seconds")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs) and print its path")
    args = parser.parse_args()
    duration_s = args.minutes * 60.0

    work = Path(tempfile.mkdtemp(prefix="perdix-soak-"))
    fake = FakeKubeAPI().start()
    fake.add_workload("deployments", TASKMANAGERS, INITIAL)
    fake.add_configmap("perdix-knowledge")
    kubeconfig = fake.write_kubeconfig(work / "kubeconfig")
    exporter_port = free_port()
    (work / "exporter.yaml").write_text(
        yaml.safe_dump(
            {
                "simulator": simulator_settings(args.speed),
                "scale_target": {"kind": "deployment", "name": TASKMANAGERS, "kubeconfig": str(kubeconfig)},
                "telemetry": {"log_format": "json", "log_level": "warning"},
            }
        )
    )
    trace = write_trace(work / "waves.csv", duration_s * args.speed + 600 * args.speed, args.speed)
    (work / "prometheus").mkdir()
    prometheus = PrometheusServer(work / "prometheus", [f"127.0.0.1:{exporter_port}"])
    processes: list[Process] = []
    rss: list[tuple[float, float]] = []
    try:
        exporter = Process(
            [
                *PERDIX,
                "simulate",
                "--trace",
                str(trace),
                "--config",
                str(work / "exporter.yaml"),
                "--serve-metrics",
                f"127.0.0.1:{exporter_port}",
                "--speed",
                str(args.speed),
                "--follow-scale-target",
                "--log-format",
                "json",
                "--log-level",
                "warning",
            ],
            work / "exporter.log",
        )
        processes.append(exporter)
        poll(lambda: http_get(f"http://127.0.0.1:{exporter_port}/healthz")[0] == 200, timeout_s=60, what="the exporter")
        prometheus.start()
        port = free_port()
        (work / "agent.yaml").write_text(yaml.safe_dump(agent_settings(prometheus, kubeconfig, port)))
        agent = Process([*PERDIX, "run", "--config", str(work / "agent.yaml")], work / "agent.log")
        processes.append(agent)
        poll(
            lambda: http_get(f"http://127.0.0.1:{port}/healthz")[0] == 200 or agent.popen.poll() is not None,
            timeout_s=60,
            what="perdix run /healthz",
        )
        if agent.popen.poll() is not None:
            raise SystemExit(f"perdix run exited with {agent.popen.returncode}:\n{agent.tail()}")
        started = time.monotonic()
        next_sample = started
        print(
            f"soak: {args.minutes:g} wall minutes at speed {args.speed:g}, agent pid {agent.popen.pid}, work {work}",
            flush=True,
        )
        while (now := time.monotonic()) - started < duration_s:
            if agent.popen.poll() is not None:
                raise SystemExit(f"perdix run died after {now - started:.0f} s:\n{agent.tail()}")
            if now >= next_sample:
                value = rss_mib(agent.popen.pid)
                if value is not None:
                    rss.append((now - started, value))
                next_sample += args.sample_s
                if len(rss) % 30 == 0:
                    print(
                        f"  t={now - started:6.0f} s  rss={value:.1f} MiB  "
                        f"replicas={fake.replicas('deployments', TASKMANAGERS)}",
                        flush=True,
                    )
            time.sleep(min(1.0, max(0.0, next_sample - time.monotonic())))  # sampling cadence of a benchmark
        final = samples(port)
        exit_code = agent.terminate()
    finally:
        for process in processes:
            process.terminate(timeout_s=20)
        prometheus.stop()
        fake.stop()

    lines = agent.lines()
    levels: dict[str, int] = {}
    events: dict[str, int] = {}
    for line in lines:
        level = str(line.get("level", "?"))
        levels[level] = levels.get(level, 0) + 1
        if level in ("error", "warning", "critical"):
            events[str(line.get("event"))] = events.get(str(line.get("event")), 0) + 1
    steady = [(t, v) for t, v in rss if t >= min(WARMUP_S, duration_s / 4)]
    times = np.array([t for t, _ in steady])
    values = np.array([v for _, v in steady])
    slope = float(np.polyfit(times / 3600.0, values, 1)[0]) if len(steady) >= 3 else math.nan
    rounds = sum(labelled(final, "perdix_rounds_total").values())
    print(
        f"\nsoak finished: {duration_s / 60:.1f} wall min at speed {args.speed:g} "
        f"({duration_s * args.speed / 3600:.1f} simulated hours), agent exit code {exit_code}"
    )
    print(f"  rounds: {rounds:.0f} {labelled(final, 'perdix_rounds_total')}")
    print(
        f"  rescales applied: {final.get('perdix_rescales_total', 0):.0f}, "
        f"scale-target writes on the fake API: {len(fake.scale_target_writes())}"
    )
    mean_loop_s = final.get("perdix_loop_duration_seconds_sum", 0) / max(
        1, final.get("perdix_loop_duration_seconds_count", 1)
    )
    print(
        f"  loop latency: p50 <= {histogram_quantile(final, 'perdix_loop_duration_seconds', 0.5) * 1000:.0f} ms, "
        f"p95 <= {histogram_quantile(final, 'perdix_loop_duration_seconds', 0.95) * 1000:.0f} ms "
        f"(bucket upper bounds), mean "
        f"{mean_loop_s * 1000:.0f} ms"
    )
    if rss:
        print(
            f"  RSS: first {rss[0][1]:.1f} MiB, after warm-up {values[0] if len(values) else math.nan:.1f} MiB, "
            f"end {rss[-1][1]:.1f} MiB, max {max(v for _, v in rss):.1f} MiB, "
            f"slope after warm-up {slope:+.2f} MiB/hour over {len(steady)} samples"
        )
    print(f"  round failures: {labelled(final, 'perdix_round_failures_total') or 0}")
    print(f"  monitor errors: {labelled(final, 'perdix_monitor_errors_total') or 0}")
    print(f"  executor errors: {labelled(final, 'perdix_executor_errors_total') or 0}")
    print(f"  log lines by level: {levels}; warning/error events: {events}")
    (work / "soak.json").write_text(json.dumps({"rss": rss, "metrics": final}, indent=1))
    if args.keep:
        print(f"  logs and samples in {work}")


if __name__ == "__main__":
    main()
