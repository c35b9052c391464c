"""A loopback fake of the few Flink REST endpoints the flink-rest scaler uses, for error paths a real
cluster cannot be made to show on demand (default scheduler, 5xx bursts, a rescale that never lands).

It serves /config, /overview, /taskmanagers, /jobs/overview, /jobs/{id}, /jobs/{id}/plan,
/jobs/{id}/resource-requirements (GET/PUT), /jobs/{id}/jobmanager/config,
/jobs/{id}/checkpoints (POST: trigger) and /jobs/{id}/checkpoints/{triggerId}, and
/jobs/{id}/vertices/{vid}/subtasktimes from a small in-memory job whose shape matches what Flink 2.3
answers (checked against the real cluster in test_flink_rest_scaler).
Lives in tests/ only; records every request.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class FakeJob:
    """One job: vertices with parallelism, the scheduler it runs on, and how PUTs are applied."""

    job_id: str = "0" * 31 + "1"
    name: str = "fake-job"
    scheduler: str = "Adaptive"
    report_scheduler: bool = True
    """False: /jobs/{id} leaves out schedulerType, as REST APIs before Flink 2.x do."""
    vertices: dict[str, int] = field(default_factory=lambda: {"a" * 32: 2, "b" * 32: 2})
    names: dict[str, str] = field(default_factory=lambda: {"a" * 32: "Source: src", "b" * 32: "Sink: snk"})
    created_ms: int = 1_000_000
    apply_puts: bool = True
    """False: a PUT is accepted but the job never changes (a cluster short of slots, a stuck restart)."""
    slots_total: int = 4
    state: str = "RUNNING"
    bounds: dict[str, int] = field(default_factory=dict)
    """Upper bounds of the resource requirements as last PUT (a vertex without one: its parallelism)."""
    inputs: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Upstream vertex ids per vertex, for /jobs/{id}/plan (a vertex not named: a source)."""
    max_parallelism: dict[str, int] = field(default_factory=dict)
    """Per vertex, its max parallelism where not Flink's default 128 (1: a non-parallel operator)."""
    slot_groups: dict[str, str] = field(default_factory=dict)
    """Per vertex, its slot-sharing group where not the job's one group ``ssg``."""
    splits: dict[str, int] = field(default_factory=dict)
    """Per source vertex, the splits it has: subtasks beyond them run and FINISH (a generator source's readers)."""
    checkpoints: str = "complete"
    """What a checkpoint triggered through the REST API does: ``complete``, ``fail``, or ``never`` (in progress
    for ever, a checkpoint blocked behind back-pressure)."""
    triggered: list[str] = field(default_factory=list)
    """Trigger ids of the checkpoints triggered through the REST API, in order."""

    def task_counts(self, vid: str) -> dict[str, int]:
        """The vertex's subtasks by state, as /jobs/{id} counts them."""
        p = self.vertices[vid]
        finished = max(p - self.splits[vid], 0) if vid in self.splits else 0
        return {"RUNNING": p - finished, "FINISHED": finished}


class FakeFlinkRest:
    """The fake server; ``failures`` makes the next N requests to a path answer 503."""

    def __init__(self, *jobs: FakeJob) -> None:
        self.jobs = {job.job_id: job for job in (jobs or (FakeJob(),))}
        self.log: list[tuple[str, str, int]] = []
        self.version = "2.3.0"
        """The Flink version /config reports (the checkpoint of a rescale comes before the PUT below 2.0)."""
        self.failures: dict[str, int] = {}
        self.put_bodies: list[Any] = []
        self.lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # ------------------------------------------------------------------ answers

    def _job_body(self, job: FakeJob) -> dict[str, Any]:
        body: dict[str, Any] = {
            "jid": job.job_id,
            "name": job.name,
            "state": job.state,
            "timestamps": {"CREATED": job.created_ms, "RUNNING": job.created_ms + 5, "RESTARTING": 0},
            "now": job.created_ms + 10_000,
            "vertices": [
                {
                    "id": vid,
                    "name": job.names.get(vid, vid),
                    "parallelism": p,
                    "maxParallelism": job.max_parallelism.get(vid, 128),
                    "status": "RUNNING",
                    "slotSharingGroupId": job.slot_groups.get(vid, "ssg"),
                    "tasks": job.task_counts(vid),
                }
                for vid, p in job.vertices.items()
            ],
        }
        if job.report_scheduler:
            body["schedulerType"] = job.scheduler
        return body

    def answer(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        """Status and JSON body for one request."""
        remaining = self.failures.get(path, 0)
        if remaining:
            self.failures[path] = remaining - 1
            return 503, {"errors": ["Service temporarily unavailable"]}
        if path == "/config":
            return 200, {"flink-version": self.version}
        if path == "/overview":
            used = sum(max(j.vertices.values()) for j in self.jobs.values() if j.state == "RUNNING")
            total = sum(j.slots_total for j in self.jobs.values()) // max(len(self.jobs), 1)
            return 200, {"slots-total": total, "slots-available": max(total - used, 0), "taskmanagers": total}
        if path == "/taskmanagers":
            return 200, {
                "taskmanagers": [
                    {"id": "tm-0", "slotsNumber": 1, "totalResource": {"cpuCores": 1.0, "managedMemory": 128}},
                ]
            }
        if path == "/jobs/overview":
            return 200, {"jobs": [{"jid": j.job_id, "name": j.name, "state": j.state} for j in self.jobs.values()]}
        match = re.fullmatch(r"/jobs/([0-9a-f]+)(/.*)?", path)
        if not match or match.group(1) not in self.jobs:
            return 404, {"errors": ["Job not found"]}
        job, rest = self.jobs[match.group(1)], match.group(2) or ""
        if rest == "":
            return 200, self._job_body(job)
        if rest == "/plan":
            nodes = []
            for vid, p in job.vertices.items():
                node: dict[str, Any] = {"id": vid, "parallelism": p, "description": job.names.get(vid, vid)}
                if job.inputs.get(vid):
                    node["inputs"] = [
                        {"id": up, "num": i, "ship_strategy": "REBALANCE"} for i, up in enumerate(job.inputs[vid])
                    ]
                nodes.append(node)
            return 200, {"plan": {"jid": job.job_id, "name": job.name, "type": "STREAMING", "nodes": nodes}}
        if rest == "/jobmanager/config":
            value = "adaptive" if job.scheduler == "Adaptive" else "default"
            return 200, [{"key": "jobmanager.scheduler", "value": value}]
        if rest == "/resource-requirements" and method == "GET":
            return 200, {
                vid: {"parallelism": {"lowerBound": 1, "upperBound": job.bounds.get(vid, p)}}
                for vid, p in job.vertices.items()
            }
        if rest == "/resource-requirements" and method == "PUT":
            if job.scheduler != "Adaptive":
                return 500, {
                    "errors": [
                        "Internal server error.",
                        "<Exception on server side: The adaptive scheduler is required>",
                    ]
                }
            self.put_bodies.append(body)
            job.bounds = {vid: int(body[vid]["parallelism"]["upperBound"]) for vid in job.vertices}
            if job.apply_puts:
                job.vertices = {vid: int(body[vid]["parallelism"]["upperBound"]) for vid in job.vertices}
                job.created_ms += 60_000
            return 200, {}
        if rest == "/checkpoints" and method == "POST":
            job.triggered.append(f"{len(job.triggered) + 1:032x}")
            return 202, {"request-id": job.triggered[-1]}
        trigger = re.fullmatch(r"/checkpoints/([0-9a-f]{32})", rest)
        if trigger and trigger.group(1) in job.triggered:
            if job.checkpoints == "never":
                return 200, {"status": {"id": "IN_PROGRESS"}, "operation": None}
            if job.checkpoints == "fail":
                cause = {"class": "CheckpointException", "stack-trace": "Checkpoint expired before completing."}
                return 200, {"status": {"id": "COMPLETED"}, "operation": {"failure-cause": cause}}
            return 200, {"status": {"id": "COMPLETED"}, "operation": {"checkpointId": len(job.triggered)}}
        sub = re.fullmatch(r"/vertices/([0-9a-f]+)/subtasktimes", rest)
        if sub and sub.group(1) in job.vertices:
            running = job.created_ms + 1500  # every subtask running 1.5 s after the new graph
            subtasks = [
                {"subtask": i, "timestamps": {"CREATED": job.created_ms, "RUNNING": running}}
                for i in range(job.vertices[sub.group(1)])
            ]
            return 200, {"id": sub.group(1), "subtasks": subtasks}
        return 404, {"errors": ["Not found: " + path]}

    # ------------------------------------------------------------------ server

    def start(self) -> FakeFlinkRest:
        """Serve on a free loopback port."""
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return None

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                with fake.lock:
                    status, payload = fake.answer(self.command, self.path, body)
                    fake.log.append((self.command, self.path, status))
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PUT = do_POST = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        server = self._server
        threading.Thread(
            target=lambda: server.serve_forever(poll_interval=0.05), daemon=True, name="fake-flink"
        ).start()
        return self

    @property
    def url(self) -> str:
        """Base URL."""
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def writes(self) -> list[tuple[str, str, int]]:
        """Every non-GET request."""
        return [entry for entry in self.log if entry[0] != "GET"]

    def stop(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
