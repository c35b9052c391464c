"""``perdix run`` as a child process of the lab: its settings file, its JSON log read as it grows, its pid.

The real-Flink end-to-end tests and ``benchmarks/bench_real_flink.py`` run the production daemon
exactly as an operator would (``perdix run --config FILE``), not an in-process agent: a kill is a
real SIGKILL, a restart reads the real knowledge file. The process is stopped by its pid (SIGTERM,
SIGKILL after a deadline) whatever happens, and gets SIGTERM if the lab process dies first.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import yaml

from lab.flink.cluster import ROOT, FlinkLabError, _die_with_parent, poll

PERDIX = [sys.executable, "-m", "cli"]
"""``perdix`` as this checkout runs it: the running interpreter on the sources next to this file. The
``perdix`` console script would import whatever checkout the environment's editable install points at
(another worktree), and a script never puts the working directory on the path."""


class PerdixExited(FlinkLabError):
    """``perdix run`` exited while the lab waited for it (the message carries its log's tail)."""


class PerdixProcess:
    """``perdix run --config FILE`` as a subprocess, its JSON log read as it grows; stopped by pid.

    ``start`` may be called again after ``stop`` or ``kill``: the new process appends to the same log
    and reads the same knowledge file (a restart of the sidecar).
    """

    def __init__(self, workdir: Path, settings: dict[str, Any], *, dry_run: bool = False) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.config = workdir / "perdix.yaml"
        self.config.write_text(yaml.safe_dump(settings))
        self.log_path = workdir / "perdix.log"
        self.knowledge = Path(settings["knowledge"]["path"])
        self.args = [*PERDIX, "run", "--config", str(self.config), "--dry-run" if dry_run else "--no-dry-run"]
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def pid(self) -> int | None:
        """The running process's pid, or None."""
        return self.process.pid if self.process is not None else None

    def start(self) -> Self:
        """Start (or restart) the daemon; its output is appended to ``log_path``."""
        if self.process is not None and self.process.poll() is None:
            raise FlinkLabError(f"perdix run is already running (pid {self.process.pid})")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
        # One BLAS thread, as `make` runs everything: the loop's small fits lose time to hand-offs.
        env.setdefault("OPENBLAS_NUM_THREADS", "1")
        env.setdefault("OMP_NUM_THREADS", "1")
        with self.log_path.open("ab") as out:
            self.process = subprocess.Popen(
                self.args,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                # Before exec no thread of ours runs in the child: the fork-and-threads hazard does not apply.
                start_new_session=True,
                preexec_fn=_die_with_parent,  # noqa: PLW1509
            )
        self.starts += 1
        return self

    def stop(self, timeout_s: float = 30.0) -> int | None:
        """SIGTERM (graceful: the running round ends, the knowledge is flushed), SIGKILL after ``timeout_s``."""
        process, self.process = self.process, None
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        return process.returncode

    def kill(self) -> int | None:
        """SIGKILL, as a node failure or an OOM kill ends it: no flush, no goodbye."""
        process, self.process = self.process, None
        if process is None:
            return None
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)
        return process.returncode

    def check_alive(self) -> None:
        """PerdixExited (with the log's tail) if the process has exited."""
        if self.process is not None and self.process.poll() is not None:
            raise PerdixExited(f"perdix run exited with {self.process.returncode}:\n{self.tail()}")

    # ------------------------------------------------------------------ the log

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        """Every JSON log event so far (of one ``event`` name, if given), in order."""
        out = []
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return []
        for line in text.splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and (name is None or entry.get("event") == name):
                out.append(entry)
        return out

    def wait_for(
        self, predicate: Callable[[dict[str, Any]], bool], *, timeout_s: float, what: str, after: int = 0
    ) -> dict[str, Any]:
        """The first log event from index ``after`` on that matches ``predicate``.

        Fails with the log's tail if the process exits or time runs out.
        """

        def found() -> dict[str, Any] | None:
            self.check_alive()
            return next((e for e in self.events()[after:] if predicate(e)), None)

        try:
            return poll(found, timeout_s=timeout_s, interval_s=0.3, what=what)
        except FlinkLabError as exc:
            if isinstance(exc, PerdixExited):
                raise
            raise type(exc)(f"{exc}\n--- perdix log ---\n{self.tail()}") from None

    def tail(self, lines: int = 30) -> str:
        """The last lines of the log."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""
