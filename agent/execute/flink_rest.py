"""The ``flink-rest`` scaler: rescales a running Flink job in place through the JobManager's REST API.

For clusters outside Kubernetes (standalone, YARN, VMs) and for the per-operator policies: the
adaptive scheduler (``jobmanager.scheduler: adaptive``, Flink 1.18+) takes per-vertex parallelism
bounds at ``PUT /jobs/{jobId}/resource-requirements`` and restarts the job at the new parallelism
without a new submission, the mechanism the Flink Kubernetes operator uses for in-place scaling.

A rescale here:
1. finds the job by id or name in ``/jobs/overview`` (the only running job when none is configured);
2. refuses clearly, without writing, when the job is not on the adaptive scheduler, when the target is
   above every vertex's max parallelism (or a vertex named on its own is asked past its own), or when the
   cluster has too few free slots for the target;
3. with ``checkpoint_before_rescale``, aligns the restart with a checkpoint triggered for it
   (:class:`CheckpointAligner`: awaited before the write on Flink 1.x, triggered right after it on 2.x, whose
   scheduler waits for one), so the restart replays next to nothing;
4. ``PUT``s the new upper bound of every vertex (or of the named ones, for per-operator policies); a
   job-wide rescale caps each vertex at its max parallelism, so a non-parallel operator (``windowAll``, a
   global aggregate) stays at 1 while the rest of the job scales;
   the lower bound is 1, so a shortage of slots never stops the job: it runs at what it can get;
5. reads ``/jobs/{jobId}`` until every vertex runs all its subtasks at the new parallelism (deadline,
   injectable clock and sleep); only what is read back counts as confirmed;
6. measures the downtime from the job's own timestamps: from the creation of the new execution graph
   (the old one has just been cancelled) to the last subtask entering RUNNING
   (``/jobs/{jobId}/vertices/{vertexId}/subtasktimes``), and returns it in the RescaleResult.

Dry-run never writes: it reads the current parallelism and returns. Every request is kept in
``requests`` (method, path, status) so tests and logs can prove what was sent. Transient failures
(connection refused, timeouts, 5xx) are retried with capped backoff; 4xx are not.
"""

from __future__ import annotations

import json
import math
import random
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from structlog.typing import FilteringBoundLogger

from agent.clock import Clock, WallClock
from agent.json_types import JsonObject, JsonValue, as_object, as_str, member, objects
from agent.logging import get_logger
from agent.ports import RescaleResult, ScalerError
from agent.settings import ScaleTargetSettings
from planner.peer_types import integer_from_json
from planner.safeguards import SlotResources

TERMINAL_STATES = frozenset({"FINISHED", "CANCELED", "FAILED", "SUSPENDED"})
"""Job states from which a job never runs again (a job in them is not the job to scale)."""

DEFAULT_CONFIRM_TIMEOUT_S = 120.0
"""Longest wait for a rescale to show up at the new parallelism (a restart of a big state takes time)."""

REACH_TIMEOUT_S = 2.0
"""Longest wait of each request of the round's read of the free slots (tried once: the round plans without it)."""


# ---------------------------------------------------------------------------------------------- HTTP


@dataclass(frozen=True)
class RestRequest:
    """One request sent to the Flink REST API (for the request log)."""

    method: str
    path: str
    status: int | None
    """HTTP status, or None when nothing answered."""


class FlinkRestClient:
    """A small JSON client for the JobManager's REST API with capped retries and a request log."""

    def __init__(
        self,
        rest_url: str,
        *,
        timeout_s: float = 10.0,
        max_retries: int = 4,
        sleep: Callable[[float], None] = time.sleep,
        backoff_base_s: float = 0.5,
        backoff_cap_s: float = 8.0,
        rng: random.Random | None = None,
    ) -> None:
        self.rest_url = rest_url.rstrip("/")
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.sleep = sleep
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s
        self.rng = rng or random.Random()
        self.requests: list[RestRequest] = []
        self.interrupted: Callable[[], bool] = lambda: False
        """True once the caller is stopping: a failed request is not retried."""

    def get(self, path: str) -> JsonValue:
        """GET ``path`` and return its JSON body."""
        return self._call("GET", path, None)

    @contextmanager
    def tried_once(self, timeout_s: float) -> Iterator[None]:
        """Within it, each request is tried once with at most ``timeout_s``: for a read a round can do without,
        which must not hold the round for the retries and timeouts a write is allowed."""
        saved = self.max_retries, self.timeout_s
        self.max_retries, self.timeout_s = 0, min(self.timeout_s, timeout_s)
        try:
            yield
        finally:
            self.max_retries, self.timeout_s = saved

    def put(self, path: str, body: JsonValue) -> JsonValue:
        """PUT ``body`` as JSON to ``path`` and return the JSON answer (None if empty)."""
        return self._call("PUT", path, body)

    def post(self, path: str, body: JsonValue) -> JsonValue:
        """POST ``body`` as JSON to ``path`` and return the JSON answer (None if empty)."""
        return self._call("POST", path, body)

    def _once(self, method: str, path: str, body: JsonValue) -> JsonValue:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self.rest_url + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                self.requests.append(RestRequest(method, path, response.status))
                raw = response.read()
        except urllib.error.HTTPError as exc:
            self.requests.append(RestRequest(method, path, exc.code))
            detail = _error_detail(exc)
            kind = "not_found" if exc.code == 404 else "server_error" if exc.code >= 500 else "rejected"
            raise ScalerError(
                f"{method} {self.rest_url}{path}: HTTP {exc.code}{': ' + detail if detail else ''}",
                kind=kind,
                retryable=exc.code >= 500 or exc.code == 429,
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            self.requests.append(RestRequest(method, path, None))
            reason = getattr(exc, "reason", exc)
            kind = "timeout" if isinstance(reason, TimeoutError) or "timed out" in str(reason) else "unreachable"
            raise ScalerError(f"{method} {self.rest_url}{path}: {kind}: {reason}", kind=kind, retryable=True) from None
        if not raw.strip():
            return None
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):
            raise ScalerError(f"{method} {self.rest_url}{path}: answer is not JSON", kind="rejected") from None

    def _call(self, method: str, path: str, body: JsonValue) -> JsonValue:
        attempt = 0
        while True:
            try:
                return self._once(method, path, body)
            except ScalerError as exc:
                if not exc.retryable or attempt >= self.max_retries or self.interrupted():
                    raise
                # Jittered, capped exponential backoff: the write sets a value, so repeating it is safe.
                ceiling = min(self.backoff_cap_s, self.backoff_base_s * 2**attempt)
                self.sleep(self.rng.uniform(ceiling / 2, ceiling))
                attempt += 1


def _error_detail(exc: urllib.error.HTTPError) -> str:
    """The first line of Flink's ``{"errors": [...]}`` answer, if there is one."""
    try:
        body = json.loads(exc.read().decode(errors="replace") or "{}")
    except (ValueError, OSError):
        return ""
    errors = body.get("errors") if isinstance(body, dict) else None
    if not errors:
        return ""
    first = str(errors[0]).strip().splitlines()
    return first[0][:300] if first else ""


def unreachable_reason(target: ScaleTargetSettings) -> str | None:
    """Why the Flink REST URL cannot be used right now (one line), or None when it answers.

    The CLI calls this at start and exits 2 with the line; later outages are only gaps.
    """
    client = FlinkRestClient(target.rest_url, timeout_s=target.request_timeout_s, max_retries=0)
    try:
        config = client.get("/config")
    except ScalerError as exc:
        return f"scale_target.rest_url ({target.rest_url}): Flink REST API does not answer: {exc}"
    if not isinstance(config, dict) or "flink-version" not in config:
        return (
            f"scale_target.rest_url ({target.rest_url}): answers, but not as a Flink JobManager "
            "(no flink-version in /config)"
        )
    return None


# ---------------------------------------------------------------------------------------------- the job


@dataclass(frozen=True)
class Vertex:
    """One job vertex as /jobs/{jobId} reports it."""

    id: str
    name: str
    parallelism: int
    max_parallelism: int
    running_subtasks: int
    slot_sharing_group: str | None
    finished_subtasks: int = 0
    """Subtasks that ran and FINISHED (a source reader left without a split): they never run again."""

    @property
    def fully_running(self) -> bool:
        """True when every subtask of the vertex is RUNNING or has run and FINISHED.

        A reader that gets no split at the new parallelism (more readers than splits in a bounded or
        generator source) finishes right after it starts; waiting for it to run would hold every rescale
        for the whole confirm timeout.
        """
        return self.running_subtasks + self.finished_subtasks == self.parallelism

    @property
    def limit(self) -> float:
        """The largest parallelism the vertex takes: its max parallelism (infinite where the REST API gave none)."""
        return self.max_parallelism if self.max_parallelism > 0 else math.inf


@dataclass(frozen=True)
class FlinkJobStatus:
    """What /jobs/{jobId} says about the job at one moment."""

    job_id: str
    name: str
    state: str
    scheduler: str | None
    """``Adaptive`` or ``Default`` (Flink 2.x reports it; None where the REST API does not say)."""
    vertices: tuple[Vertex, ...]
    created_at_ms: int
    """When the current execution graph was created: it changes with every in-place restart."""

    @property
    def parallelism(self) -> int | None:
        """The job's scale-out: the largest vertex parallelism (the sources', in a uniform job)."""
        return max((v.parallelism for v in self.vertices), default=None)

    @property
    def slots_needed(self) -> int:
        """Slots the job occupies: per slot-sharing group, its largest vertex parallelism."""
        groups: dict[str, int] = {}
        for v in self.vertices:
            key = v.slot_sharing_group or v.id
            groups[key] = max(groups.get(key, 0), v.parallelism)
        return sum(groups.values())

    def running_at(self, targets: Mapping[str, int]) -> bool:
        """True when the job runs and every vertex runs all subtasks at its target (others: all running)."""
        if self.state != "RUNNING":
            return False
        return all(v.fully_running and (v.id not in targets or v.parallelism == targets[v.id]) for v in self.vertices)

    @classmethod
    def from_rest(cls, body: JsonObject) -> FlinkJobStatus:
        """Parse a /jobs/{jobId} answer."""
        vertices = tuple(
            Vertex(
                id=str(v["id"]),
                name=str(v.get("name", "")),
                parallelism=integer_from_json(v["parallelism"]),
                max_parallelism=integer_from_json(v.get("maxParallelism") or v.get("max-parallelism") or 0),
                running_subtasks=integer_from_json(member(v, "tasks").get("RUNNING", 0)),
                slot_sharing_group=as_str(v.get("slotSharingGroupId")),
                finished_subtasks=integer_from_json(member(v, "tasks").get("FINISHED", 0)),
            )
            for v in objects(body.get("vertices") or [])
        )
        timestamps = member(body, "timestamps")
        return cls(
            job_id=str(body["jid"]),
            name=str(body.get("name", "")),
            state=str(body.get("state", "")),
            scheduler=as_str(body.get("schedulerType")),
            vertices=vertices,
            created_at_ms=integer_from_json(timestamps.get("CREATED") or 0),
        )


# ---------------------------------------------------------------------------------------------- checkpoints


class CheckpointAligner:
    """Triggers a checkpoint for a rescale (``POST /jobs/{jobId}/checkpoints``, Flink 1.19+), so the restart
    resumes from state taken a moment before it and replays next to nothing instead of up to a checkpoint
    interval of records.

    Flink 1.x rescales as soon as the new resource requirements are written: the checkpoint is awaited before
    the write, at most ``wait_s`` (the job runs on meanwhile). Flink 2.x's adaptive scheduler holds a rescale
    until a checkpoint completes (``jobmanager.adaptive-scheduler.rescale-trigger.max-delay``, by default the
    checkpoint interval times one more than ``rescale-trigger.max-checkpoint-failures``): there the checkpoint
    is triggered right after the write, so the scheduler's wait ends when it completes (or when a periodic one
    already in flight does, sooner) instead of at the next periodic one. A checkpoint that fails, or does not
    complete in time, is logged and the rescale goes ahead.
    """

    def __init__(
        self,
        client: FlinkRestClient,
        clock: Clock,
        log: FilteringBoundLogger,
        *,
        wait_s: float,
        poll_interval_s: float = 0.05,
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        self.client = client
        self.clock = clock
        self.log = log
        self.wait_s = wait_s
        self.poll_interval_s = poll_interval_s
        self.stopping = stopping
        """True once the daemon is stopping: the wait ends at once and the rescale goes ahead."""
        self._major: int | None = None

    def scheduler_waits(self) -> bool:
        """True when the cluster's adaptive scheduler itself waits for a checkpoint before it rescales (2.x)."""
        if self._major is None:
            try:
                with self.client.tried_once(REACH_TIMEOUT_S):
                    version = str(as_object(self.client.get("/config")).get("flink-version", ""))
                self._major = int(version.split(".", 1)[0])
            except (ScalerError, ValueError, TypeError):
                return False  # unknown for now: awaiting the checkpoint first is right on every release
        return self._major >= 2

    def checkpoint(self, job_id: str, *, wait: bool) -> int | None:
        """Trigger a checkpoint of ``job_id``; with ``wait``, the id of the checkpoint once it completed within
        ``wait_s`` (None: failed, too slow or not awaited; logged)."""
        deadline = self.clock.now() + self.wait_s
        try:
            with self.client.tried_once(min(self.wait_s, REACH_TIMEOUT_S)):
                answer = as_object(self.client.post(f"/jobs/{job_id}/checkpoints", {}))
            trigger = str(answer["request-id"])
        except (ScalerError, KeyError, TypeError) as exc:
            self.log.warning("rescale.checkpoint_failed", job=job_id, error=f"the checkpoint was not triggered: {exc}")
            return None
        if not wait:
            return None
        while not self.stopping():
            remaining = deadline - self.clock.now()
            if remaining <= 0:
                break
            outcome = self._status(job_id, trigger, remaining)
            if outcome is not None:
                return outcome if outcome >= 0 else None
            self.clock.sleep_until(min(deadline, self.clock.now() + self.poll_interval_s))
        if not self.stopping():
            self.log.warning(
                "rescale.checkpoint_slow",
                job=job_id,
                error=f"the checkpoint did not complete within {self.wait_s:g} s: rescaling without it",
            )
        return None

    def _status(self, job_id: str, trigger: str, remaining_s: float) -> int | None:
        """The completed checkpoint's id, -1 when it failed (logged), None while it runs or cannot be read."""
        try:
            with self.client.tried_once(min(remaining_s, REACH_TIMEOUT_S)):
                answer = as_object(self.client.get(f"/jobs/{job_id}/checkpoints/{trigger}"))
            if member(answer, "status")["id"] != "COMPLETED":
                return None
            operation = member(answer, "operation")
            if "checkpointId" in operation:
                return integer_from_json(operation["checkpointId"])
            cause = str(member(operation, "failure-cause").get("stack-trace") or operation).strip()
        except (ScalerError, KeyError, TypeError, ValueError, AttributeError):
            return None  # unreadable now (or an answer of another shape): read again until the deadline
        first = cause.splitlines()[0][:300] if cause else "no cause given"
        self.log.warning("rescale.checkpoint_failed", job=job_id, error=f"the checkpoint failed: {first}")
        return -1


# ---------------------------------------------------------------------------------------------- scaler


def _slots_at(job: FlinkJobStatus, wanted: Mapping[str, int]) -> int:
    """Slots ``job`` needs with the vertices in ``wanted`` at their targets (the rest as they are)."""
    return FlinkJobStatus(
        job.job_id,
        job.name,
        job.state,
        job.scheduler,
        tuple(
            Vertex(v.id, v.name, wanted.get(v.id, v.parallelism), v.max_parallelism, 0, v.slot_sharing_group)
            for v in job.vertices
        ),
        job.created_at_ms,
    ).slots_needed


def _requirements_body(job: FlinkJobStatus, wanted: Mapping[str, int], current: JsonObject) -> tuple[JsonObject, bool]:
    """The resource requirements to PUT (every vertex: lower bound 1, upper bound its target or its bound now),
    and whether the bounds now already are the targets."""
    body: JsonObject = {}
    for vertex in job.vertices:
        bounds = member(member(current, vertex.id), "parallelism")
        upper = wanted.get(vertex.id, integer_from_json(bounds.get("upperBound", vertex.parallelism)))
        # Lower bound 1: with too few slots the job keeps running at what it gets instead of stopping.
        body[vertex.id] = {"parallelism": {"lowerBound": 1, "upperBound": upper}}
    settled = all(
        integer_from_json(member(member(current, vid), "parallelism").get("upperBound", -1)) == upper
        for vid, upper in wanted.items()
    )
    return body, settled


class FlinkRestScaler:
    """Scaler over the adaptive scheduler's resource requirements (see the module doc)."""

    def __init__(
        self,
        settings: ScaleTargetSettings,
        *,
        client: FlinkRestClient | None = None,
        clock: Clock | None = None,
        confirm_timeout_s: float = DEFAULT_CONFIRM_TIMEOUT_S,
        poll_interval_s: float = 1.0,
    ) -> None:
        self.settings = settings
        self.clock = clock or WallClock()
        self.client = client or FlinkRestClient(
            settings.rest_url, timeout_s=settings.request_timeout_s, max_retries=settings.max_retries
        )
        self.confirm_timeout_s = confirm_timeout_s
        self.poll_interval_s = poll_interval_s
        self.log = get_logger("perdix.execute", target=f"flink-rest {settings.rest_url}", job=settings.job)
        self._job_id: str | None = None
        self._reported: set[str] = set()
        self._stopping = threading.Event()
        """Set by :meth:`interrupt`: no more waiting for confirmations, checkpoints or retrying requests."""
        self.client.interrupted = self._stopping.is_set
        self.aligner = CheckpointAligner(
            self.client, self.clock, self.log, wait_s=settings.checkpoint_wait_s, stopping=self._stopping.is_set
        )

    def interrupt(self) -> None:
        """Cut short any wait for a rescale's confirmation (the daemon is stopping): Flink finishes a rescale
        already requested on its own, and the rescale returns ``pending`` for the next start to confirm."""
        self._stopping.set()

    @property
    def requests(self) -> list[RestRequest]:
        """Every request sent so far, in order."""
        return self.client.requests

    # ------------------------------------------------------------------ reading

    def find_job(self) -> str:
        """The id of the job to scale: ``scale_target.job`` as id or name, else the only running job."""
        overview = as_object(self.client.get("/jobs/overview"))
        jobs = [j for j in objects(overview.get("jobs", [])) if j.get("state") not in TERMINAL_STATES]
        wanted = self.settings.job
        if wanted:
            matches = [j for j in jobs if j.get("jid") == wanted or j.get("name") == wanted]
        else:
            matches = jobs
        if not matches:
            what = f"job {wanted!r}" if wanted else "a running job"
            names = ", ".join(f"{j.get('name')} ({j.get('jid')})" for j in jobs) or "none"
            raise self._once_error("not_found", f"not found: no {what} on {self.settings.rest_url} (running: {names})")
        if len(matches) > 1:
            listed = ", ".join(f"{j.get('name')} ({j.get('jid')})" for j in matches)
            hint = "name the job by id in scale_target.job" if wanted else "set scale_target.job"
            raise self._once_error("ambiguous", f"{len(matches)} running jobs match: {listed}; {hint}")
        self._reported.discard("not_found")
        return str(matches[0]["jid"])

    def job_state(self) -> FlinkJobStatus:
        """The job's state now; re-finds the job once if its id vanished (resubmitted under the same name)."""
        if self._job_id is None:
            self._job_id = self.find_job()
        try:
            body = self.client.get(f"/jobs/{self._job_id}")
        except ScalerError as exc:
            if exc.kind != "not_found":
                raise
            self._job_id = self.find_job()
            body = self.client.get(f"/jobs/{self._job_id}")
        state = FlinkJobStatus.from_rest(as_object(body))
        if state.state in TERMINAL_STATES:
            self._job_id = None
            raise ScalerError(f"job {state.name} ({state.job_id}) is {state.state}", kind="not_found")
        self._warn_idle_readers(state)
        return state

    def parallelism_now(self) -> int | None:
        """The job's scale-out now, tried once within ``REACH_TIMEOUT_S``; None if it cannot be read."""
        try:
            with self.client.tried_once(REACH_TIMEOUT_S):
                return self.job_state().parallelism
        except ScalerError:
            return None

    def current_parallelism(self) -> int | None:
        """The job's scale-out now (largest vertex parallelism), or None if it cannot be read."""
        try:
            return self.job_state().parallelism
        except ScalerError as exc:
            self.log.warning("scale_target.read_failed", kind=exc.kind, error=str(exc))
            return None

    def vertex_parallelism(self) -> dict[str, int]:
        """Parallelism of every vertex by vertex name (for per-operator policies)."""
        return {v.name: v.parallelism for v in self.job_state().vertices}

    def resource_requirements(self) -> JsonObject:
        """The job's current resource requirements, as Flink returns them."""
        if self._job_id is None:
            self._job_id = self.find_job()
        return dict(as_object(self.client.get(f"/jobs/{self._job_id}/resource-requirements")))

    # ------------------------------------------------------------------ writing

    def rescale(self, target: int, *, reasons: tuple[str, ...], dry_run: bool) -> RescaleResult:
        """Set every vertex to ``target`` in place and confirm by read-back; dry-run only reads."""
        return self.rescale_vertices({"*": target}, reasons=reasons, dry_run=dry_run)

    def rescale_vertices(self, targets: Mapping[str, int], *, reasons: tuple[str, ...], dry_run: bool) -> RescaleResult:
        """Set the named vertices (by id or name; ``"*"`` for all) to their parallelism in place.

        ``requested`` and ``confirmed`` of the result are the job's scale-out (largest vertex
        parallelism) asked for and read back.
        """
        if any(n < 1 for n in targets.values()):
            raise ScalerError(f"refusing to set a parallelism below 1: {dict(targets)}", kind="invalid_request")
        before = self.job_state()
        wanted = self._resolve(before, targets)
        requested = max(wanted.get(v.id, v.parallelism) for v in before.vertices)
        unchanged = RescaleResult(requested=requested, confirmed=before.parallelism, dry_run=dry_run)
        if dry_run:  # the loop logs the recommendation; nothing is written here
            return unchanged
        self._check_can_rescale(before, wanted, job_target=targets.get("*"))
        body, settled = _requirements_body(before, wanted, self.resource_requirements())
        if before.running_at(wanted):
            if not settled:
                # Running at the target already, but an earlier short rescale left a higher bound behind: lower
                # it, so a slot freed later does not rescale the job behind Perdix's back. No restart follows.
                self.client.put(f"/jobs/{before.job_id}/resource-requirements", body)
            return unchanged
        self._write_requirements(before, body)
        why = reasons[-1] if reasons else "no reason given"
        self.log.info("rescale.requested", job=before.job_id, current=before.parallelism, target=requested, reason=why)
        return self._confirm(before, wanted, requested)

    def _write_requirements(self, before: FlinkJobStatus, body: JsonObject) -> None:
        """PUT the new resource requirements, aligned with a checkpoint where ``checkpoint_before_rescale`` asks."""
        align = self.settings.checkpoint_before_rescale
        after_write = align and self.aligner.scheduler_waits()
        if align and not after_write:
            self.aligner.checkpoint(before.job_id, wait=True)
        try:
            self.client.put(f"/jobs/{before.job_id}/resource-requirements", body)
        except ScalerError as exc:
            if exc.kind == "rejected" and "adaptive" in str(exc).lower():
                raise ScalerError(self._not_adaptive(before), kind="not_adaptive") from None
            raise
        if after_write:
            self.aligner.checkpoint(before.job_id, wait=False)

    def _confirm(self, before: FlinkJobStatus, wanted: Mapping[str, int], requested: int) -> RescaleResult:
        """Wait for the job to run at ``wanted`` and measure the stop; the result as read back."""
        after = self._await(before, wanted)
        if self._stopping.is_set() and (after is None or not after.running_at(wanted)):
            # Kubernetes kills the pod soon after SIGTERM; the confirmation would take up to confirm_timeout_s.
            self.log.warning(
                "rescale.left_pending",
                job=before.job_id,
                requested=requested,
                error="stopping before the rescale was confirmed: Flink finishes it, the next start confirms it",
            )
            return RescaleResult(requested=requested, confirmed=None, dry_run=False, pending=True)
        stop = self._stop(before, after)
        downtime, resumed_at = stop if stop is not None else (None, None)
        confirmed = after.parallelism if after is not None else self.current_parallelism()
        if after is None or not after.running_at(wanted):
            self.log.error(
                "rescale.short",
                job=before.job_id,
                requested=requested,
                reached=confirmed,
                error=f"the job did not reach parallelism {requested} within {self.confirm_timeout_s:g} s; "
                f"it runs at {confirmed} (the parallelism reached is what counts)",
            )
        return RescaleResult(
            requested=requested, confirmed=confirmed, dry_run=False, downtime_s=downtime, resumed_at=resumed_at
        )

    # ------------------------------------------------------------------ helpers

    def _warn_idle_readers(self, job: FlinkJobStatus) -> None:
        """Say once per vertex, parallelism and count when subtasks have FINISHED while the job runs (read on every
        look at the job, so readers that finish a moment after a rescale was confirmed, or after the first of them,
        are told at the next round): a source with fewer splits than readers (a bounded source, Flink's
        DataGeneratorSource fixes its split count at the first start) leaves the extra readers with nothing to do,
        so scaling it further adds no throughput."""
        for vertex in job.vertices:
            key = f"finished:{vertex.id}:{vertex.parallelism}:{vertex.finished_subtasks}"
            if vertex.finished_subtasks and key not in self._reported:
                self._reported.add(key)
                self.log.warning(
                    "rescale.subtasks_finished",
                    job=job.job_id,
                    vertex=vertex.name,
                    parallelism=vertex.parallelism,
                    finished=vertex.finished_subtasks,
                    error=f"{vertex.finished_subtasks} of {vertex.parallelism} subtasks of {vertex.name!r} have "
                    "finished while the job runs: a source with fewer splits than readers gains nothing from more "
                    "of them",
                )

    def _resolve(self, job: FlinkJobStatus, targets: Mapping[str, int]) -> dict[str, int]:
        """Vertex id -> target from a mapping keyed by vertex id, vertex name or ``*``.

        ``*`` (the job's scale-out) takes each vertex to the target or to its own max parallelism, whichever is
        lower: a non-parallel operator (``windowAll``, a global aggregate: max parallelism 1) stays as it is, as
        Flink's own autoscaler leaves it, instead of making every scale-out of the job impossible. A target no
        vertex can take, and a vertex named on its own above its max parallelism, are refused by
        :meth:`_check_can_rescale`.
        """
        wanted: dict[str, int] = {}
        by_name = {v.name: v.id for v in job.vertices}
        ids = {v.id for v in job.vertices}
        for key, value in targets.items():
            if key == "*":
                for vertex in job.vertices:
                    wanted.setdefault(vertex.id, int(min(int(value), vertex.limit)))
            elif key in ids:
                wanted[key] = int(value)
            elif key in by_name:
                wanted[by_name[key]] = int(value)
            else:
                names = ", ".join(sorted(by_name)) or "none"
                raise ScalerError(f"job {job.name} has no vertex {key!r} (vertices: {names})", kind="invalid_request")
        return wanted

    def _check_can_rescale(
        self, job: FlinkJobStatus, wanted: Mapping[str, int], *, job_target: int | None = None
    ) -> None:
        """Refuse before writing: wrong scheduler, above max parallelism (a job-wide ``job_target`` above every
        vertex's, or a vertex's own target above its), too few free slots."""
        scheduler = job.scheduler
        if scheduler is None:
            config = self.client.get(f"/jobs/{job.job_id}/jobmanager/config")
            entries = config if isinstance(config, list) else []
            values = {entry.get("key"): entry.get("value") for entry in entries if isinstance(entry, dict)}
            scheduler = "Adaptive" if str(values.get("jobmanager.scheduler", "")).lower() == "adaptive" else "Default"
        if scheduler.lower() != "adaptive":
            raise self._once_error("not_adaptive", self._not_adaptive(job))
        largest = max((v.limit for v in job.vertices), default=math.inf)
        if job_target is not None and job_target > largest:
            raise ScalerError(
                f"job {job.name} has max parallelism {largest:.0f} (its vertices' largest), below the "
                f"target {job_target}: lower max_parallelism or raise the job's max parallelism",
                kind="invalid_request",
            )
        for vertex in job.vertices:
            target = wanted.get(vertex.id)
            if target is not None and target > vertex.limit:
                raise ScalerError(
                    f"vertex {vertex.name!r} of job {job.name} has max parallelism {vertex.max_parallelism}, "
                    f"below the target {target}",
                    kind="invalid_request",
                )
        needed = _slots_at(job, wanted)
        if needed > job.slots_needed:
            total, others = self._slots(job.job_id)
            usable = total - others
            if needed > usable:
                raise self._once_error(
                    "insufficient_slots",
                    f"insufficient slots: job {job.name} needs {needed} slots at the target but the cluster has "
                    f"{total} slots, {others} of them needed by other jobs; not rescaling "
                    "(add TaskManagers or lower max_parallelism)",
                )
        self._reported.discard("insufficient_slots")

    def reachable_parallelism(self, upper: int) -> int | None:
        """The largest job-wide scale-out up to ``upper`` that this job can run on the cluster now: within its
        vertices' max parallelism and the slots no other job needs, and never below what it runs at now.
        ScalerError when that cannot be read (the loop then keeps the last bound it read).

        The loop plans within it each round. A session or standalone cluster has the slots its TaskManagers
        brought and no more; a decision above them was refused before any write ("insufficient slots"),
        which left the job where it was rather than at the most the cluster holds.
        """
        try:
            with self.client.tried_once(REACH_TIMEOUT_S):
                job = self.job_state()
                total, others = self._slots(job.job_id)
        except (KeyError, TypeError, ValueError) as exc:
            raise ScalerError(f"the cluster's slots cannot be read: {exc}", kind="unreadable") from None
        if total <= 0:
            raise ScalerError("the cluster reports no slots", kind="unreadable")
        usable = total - others

        def fits(target: int) -> bool:
            return _slots_at(job, self._resolve(job, {"*": target})) <= usable

        largest = max((v.limit for v in job.vertices), default=math.inf)
        low, high = 1, int(min(upper, largest))
        if fits(low):
            while low < high:  # slots needed grow with the target: the largest that fits
                middle = (low + high + 1) // 2
                low, high = (middle, high) if fits(middle) else (low, middle - 1)
        # What the job runs at is reachable, however its vertices share slots: a cap below it would move a
        # healthy job down (a job of uneven vertices in two slot-sharing groups holds fewer slots than the same
        # scale-out for every vertex would need).
        return max(low, min(job.parallelism or 1, upper))

    def slot_resources(self) -> SlotResources | None:
        """CPU cores and TaskManager process memory per slot, from ``/taskmanagers`` (the quotas read them).

        Each TaskManager reports its total resource (``totalResource.cpuCores``) and its memory configuration
        (``memoryConfiguration.totalProcessMemory``, bytes) for ``slotsNumber`` slots; the largest per-slot
        figure over the TaskManagers is taken (a quota must hold whichever TaskManager a slot lands on).
        None when no TaskManager reports them; ScalerError when they cannot be read.
        """
        try:
            with self.client.tried_once(REACH_TIMEOUT_S):
                answer = self.client.get("/taskmanagers") or {}
        except (KeyError, TypeError, ValueError) as exc:
            raise ScalerError(f"the TaskManagers' resources cannot be read: {exc}", kind="unreadable") from None
        cpus: list[float] = []
        memories: list[float] = []
        for taskmanager in objects(answer.get("taskmanagers", [])) if isinstance(answer, dict) else []:
            slots = taskmanager.get("slotsNumber")
            if not isinstance(slots, int) or slots <= 0:
                continue
            cpu = member(taskmanager, "totalResource").get("cpuCores")
            if isinstance(cpu, (int, float)) and math.isfinite(cpu) and cpu > 0:
                cpus.append(float(cpu) / slots)
            memory = member(taskmanager, "memoryConfiguration").get("totalProcessMemory")
            if isinstance(memory, (int, float)) and math.isfinite(memory) and memory > 0:
                memories.append(float(memory) / 2**20 / slots)
        if not cpus and not memories:
            return None
        return SlotResources(cpu=max(cpus) if cpus else None, memory_mb=max(memories) if memories else None)

    def _slots(self, job_id: str) -> tuple[int, int]:
        """The cluster's slots, and how many of them the other running jobs need.

        After a scale-in the scheduler keeps idle slots a while and /overview counts them as taken, so the
        job may use every slot the other jobs do not need.
        """
        overview = as_object(self.client.get("/overview"))
        return integer_from_json(overview.get("slots-total", 0)), self._slots_of_other_jobs(job_id)

    def _slots_of_other_jobs(self, job_id: str) -> int:
        """Slots the other running jobs of the cluster occupy."""
        overview = as_object(self.client.get("/jobs/overview"))
        others = 0
        for entry in objects(overview.get("jobs", [])):
            if entry.get("jid") == job_id or entry.get("state") in TERMINAL_STATES:
                continue
            try:
                others += FlinkJobStatus.from_rest(as_object(self.client.get(f"/jobs/{entry['jid']}"))).slots_needed
            except (ScalerError, KeyError, ValueError, TypeError):
                continue  # a job that vanished meanwhile needs no slots
        return others

    def _not_adaptive(self, job: FlinkJobStatus) -> str:
        return (
            f"job {job.name} ({job.job_id}) does not run on the adaptive scheduler; in-place rescaling "
            "needs `jobmanager.scheduler: adaptive` in the Flink configuration"
        )

    def _once_error(self, kind: str, message: str) -> ScalerError:
        """A non-retryable error, logged once per kind until it clears (no log storm every loop)."""
        if kind not in self._reported:
            self._reported.add(kind)
            self.log.error("scale_target.unusable", kind=kind, error=message)
        return ScalerError(message, kind=kind, retryable=False)

    def _await(self, before: FlinkJobStatus, wanted: Mapping[str, int]) -> FlinkJobStatus | None:
        """Poll /jobs/{jobId} until it runs at ``wanted`` on a new execution graph; the last state read."""
        deadline = self.clock.now() + self.confirm_timeout_s
        last: FlinkJobStatus | None = None
        while True:
            try:
                last = self.job_state()
            except ScalerError as exc:
                if exc.kind == "not_found" or not exc.retryable:
                    raise
                self.log.warning("rescale.read_failed", kind=exc.kind, error=str(exc))
            if last is not None and last.created_at_ms != before.created_at_ms and last.running_at(wanted):
                return last
            if self.clock.now() >= deadline or self._stopping.is_set():
                return last
            self.clock.sleep_until(min(deadline, self.clock.now() + self.poll_interval_s))

    def _stop(self, before: FlinkJobStatus, after: FlinkJobStatus | None) -> tuple[float, float] | None:
        """``(downtime, resumed_at)``: seconds from the new execution graph's creation to the last subtask
        RUNNING, and that last RUNNING as Unix seconds; None if unknown.

        The old graph is cancelled right before the new one is created (tens of milliseconds here),
        so the creation is where processing stopped; the last subtask to run is where it resumed.
        """
        if after is None or after.created_at_ms == before.created_at_ms or not after.created_at_ms:
            return None
        last_running = 0
        for vertex in after.vertices:
            try:
                times = as_object(self.client.get(f"/jobs/{after.job_id}/vertices/{vertex.id}/subtasktimes"))
            except ScalerError as exc:
                self.log.warning("rescale.downtime_unknown", kind=exc.kind, error=str(exc))
                return None
            for subtask in objects(times.get("subtasks", [])):
                running = integer_from_json(member(subtask, "timestamps").get("RUNNING") or 0)
                if running <= 0:
                    return None
                last_running = max(last_running, running)
        if last_running < after.created_at_ms:
            return None
        downtime = (last_running - after.created_at_ms) / 1000.0
        return (downtime, last_running / 1000.0) if math.isfinite(downtime) else None


__all__ = [
    "DEFAULT_CONFIRM_TIMEOUT_S",
    "CheckpointAligner",
    "FlinkRestClient",
    "FlinkRestScaler",
    "FlinkJobStatus",
    "RestRequest",
    "Vertex",
    "unreachable_reason",
]
