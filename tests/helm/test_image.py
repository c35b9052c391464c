"""The image and the chart agree on how the container runs (read from the Dockerfile; the image itself is
built and run by the image test under tests/flink)."""

from __future__ import annotations

import json
import re

from tests.helm.chart import ROOT, perdix_pod, render

DOCKERFILE = (ROOT / "Dockerfile").read_text()


def stages() -> list[list[str]]:
    """Instructions of each build stage (continuation lines joined)."""
    joined = re.sub(r"\\\n\s*", " ", DOCKERFILE)
    out: list[list[str]] = []
    for line in joined.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            out.append([])
        if out:
            out[-1].append(line)
    return out


def runtime(instruction: str) -> list[str]:
    """The arguments of every ``instruction`` of the runtime (last) stage."""
    return [line.split(None, 1)[1] for line in stages()[-1] if line.upper().startswith(instruction + " ")]


def test_multi_stage_and_non_root_with_the_chart_uid() -> None:
    assert len(stages()) >= 2
    users = runtime("USER")
    assert users, "the runtime stage must set USER"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and int(uid) > 0, "USER must be a non-root numeric uid (runAsNonRoot needs a number)"
    _, _, container = perdix_pod(render())
    assert container["securityContext"]["runAsUser"] == int(uid)
    assert container["securityContext"]["runAsGroup"] == int(gid or uid)
    assert any(line.startswith("--from=") for line in runtime("COPY")), "the runtime stage copies the build's result"


def test_the_chart_runs_the_image_s_own_command() -> None:
    """The chart's args are the image's CMD, after its ENTRYPOINT `perdix`, on the port the image exposes."""
    assert runtime("ENTRYPOINT") == ['["perdix"]']
    _, _, container = perdix_pod(render())
    assert container["args"] == json.loads(runtime("CMD")[-1])  # exec form: a JSON array
    assert [int(port) for port in runtime("EXPOSE")] == [container["ports"][0]["containerPort"]]


def test_the_image_writes_only_where_the_chart_mounts_an_emptydir() -> None:
    """Read-only root filesystem: HOME and the working directory are /tmp, the chart's emptyDir."""
    env = " ".join(runtime("ENV"))
    assert "HOME=/tmp" in env and "PYTHONDONTWRITEBYTECODE=1" in env
    assert runtime("WORKDIR") == ["/tmp"]
    _, pod, container = perdix_pod(render())
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    tmp = next(mount for mount in container["volumeMounts"] if mount["mountPath"] == "/tmp")
    assert "emptyDir" in volumes[tmp["name"]] and container["securityContext"]["readOnlyRootFilesystem"] is True
