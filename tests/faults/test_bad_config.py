"""Fault matrix, row 8: bad configuration through the real ``perdix run`` and ``perdix simulate`` processes.

Each case is a settings file with one mistake; both commands must exit 2 and print exactly one line
on stderr, naming the file and the key, with no traceback. The processes run concurrently (start-up
is mostly imports) to keep the wall time near one process's.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.e2e.test_run_kubernetes import ROOT

CASES = {
    # (file content, fragment naming the key and the reason)
    "negative target": ("target_recovery_time_s: -5\n", "target_recovery_time_s: Input should be greater than 0"),
    "min above max": ("min_parallelism: 12\nmax_parallelism: 8\n", "min_parallelism (12) > max_parallelism (8)"),
    "malformed PromQL": (
        "prometheus:\n  queries:\n    workload: 'sum(rate(x[1m])'\n",
        "prometheus.queries.workload: malformed PromQL",
    ),
    "unknown key": ("target_recovery_time: 300\n", "target_recovery_time: unknown key"),
    "unknown nested key": ("scale_target:\n  nmae: flink\n", "scale_target.nmae: unknown key"),
}

TRACE = ROOT / "traces" / "bank_calls.csv"


def test_both_commands_exit_2_with_one_line_naming_the_key(tmp_path: Path) -> None:
    started = []
    for name, (content, fragment) in CASES.items():
        config = tmp_path / f"{name.replace(' ', '-')}.yaml"
        config.write_text(content)
        commands = {
            "run": ["run", "--config", str(config)],
            "simulate": [
                "simulate",
                "--trace",
                str(TRACE),
                "--config",
                str(config),
                "--hours",
                "0.1",
                "--out",
                str(tmp_path / "out"),
            ],
        }
        for command, args in commands.items():
            process = subprocess.Popen(
                [sys.executable, "-m", "cli", *args],
                cwd=ROOT,
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            started.append((name, command, config, fragment, process))
    problems = []
    for name, command, config, fragment, process in started:
        stdout, stderr = process.communicate(timeout=60)
        lines = [line for line in stderr.splitlines() if line.strip()]
        ok = (
            process.returncode == 2
            and len(lines) == 1
            and lines[0].startswith("perdix: error:")
            and str(config) in lines[0]
            and fragment in lines[0]
            and "Traceback" not in stderr + stdout
        )
        if not ok:
            problems.append(f"perdix {command} / {name}: exit {process.returncode}, stderr {stderr!r}")
    assert not problems, "\n".join(problems)
    assert not (tmp_path / "out").exists(), "a bad config must stop simulate before it writes anything"
