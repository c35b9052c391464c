"""The application example's job is one Perdix's default queries can read, so an example install decides.

Flink's bundled examples report no FLIP-33 ``pendingRecords`` (their sources are generators), so an
install running one would see no lag and, while saturated, no demand beyond what the job reads.
``examples/application.yaml`` runs the trace-source example job (jobs/trace-source) instead, from an
image built by ``jobs/trace-source/Dockerfile``; the chart itself names no Flink image. Here:

- the example's rendering runs that job in application mode from the image, with the Prometheus
  reporter on, and the settings it renders carry Perdix's default queries;
- the job accepts the chart's default arguments (its own option parser, through ``java``), with the
  trace at the path the image puts it;
- the Dockerfile builds the sources and main class the lab builds and runs.

That the job's source reports every series those queries read, and that they read it right, is
proven on a real cluster by tests/flink/test_trace_source.py and tests/flink/test_e2e_daedalus.py.
"""

from __future__ import annotations

import re
import subprocess

import pytest
import yaml

from agent.settings import PromQLQueries
from lab.flink import trace_job
from tests.fixtures.flink import flink_home
from tests.helm.chart import EXAMPLES, ROOT, one, render, settings_yaml

DOCKERFILE = ROOT / "jobs" / "trace-source" / "Dockerfile"
IMAGE_TRACES = "/opt/flink/traces/"
"""Where the Dockerfile puts the shipped traces."""


def example_values() -> dict:
    """The `application` section of examples/application.yaml."""
    return dict(yaml.safe_load((EXAMPLES / "application.yaml").read_text())["application"])


def test_the_example_install_runs_the_trace_source_job_from_its_image() -> None:
    objects = render(example="application")
    jobmanager = one(objects, "Deployment", "perdix-jobmanager")
    container = next(c for c in jobmanager["spec"]["template"]["spec"]["containers"] if c["name"] == "jobmanager")
    values = example_values()
    assert (
        container["image"] == f"{values['image']['repository']}:{values['image']['tag']}" == "perdix-trace-source:2.3"
    )
    assert container["args"][:3] == ["standalone-job", "--job-classname", trace_job.MAIN_CLASS]
    assert container["args"][3:] == values["job"]["args"]
    # The image holds the jar in /opt/flink/usrlib: nothing is copied over it at start.
    assert "jarPath" not in values["job"] and container["args"][3:] == values["job"]["args"]
    conf = yaml.safe_load(one(objects, "ConfigMap", "perdix-flink-conf")["data"]["config.yaml"])
    assert conf["metrics.reporter.prom.factory.class"].endswith("PrometheusReporterFactory")
    settings = yaml.safe_load(settings_yaml(objects))
    # camelCase values keys, snake_case settings keys: compare the query strings themselves.
    assert sorted(settings["prometheus"]["queries"].values()) == sorted(PromQLQueries().model_dump().values())


def test_the_job_accepts_the_chart_default_arguments() -> None:
    args = [a.replace(IMAGE_TRACES, str(ROOT / "traces") + "/") for a in example_values()["job"]["args"]]
    jar = trace_job.build_jar(home=flink_home())
    done = subprocess.run(
        ["java", "-cp", str(jar), "perdix.jobs.ProductionSchedule", *args, "--epoch-ms", "0", "--at-ms", "600000"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-800:]
    weights = [line for line in done.stdout.splitlines() if line.startswith("weight ")]
    assert len(weights) == 24, done.stdout[:400]


@pytest.mark.parametrize(
    "needle",
    [
        "COPY jobs/trace-source/src /build/src",
        f"--main-class {trace_job.MAIN_CLASS}",
        "COPY --from=build /build/trace-source.jar /opt/flink/usrlib/trace-source.jar",
        f"COPY traces/ {IMAGE_TRACES}",
    ],
)
def test_the_dockerfile_builds_what_the_lab_builds(needle: str) -> None:
    text = DOCKERFILE.read_text()
    assert needle in text, f"{DOCKERFILE.relative_to(ROOT)} lacks {needle!r}"
    assert (
        ROOT / "jobs" / "trace-source" / "src" / "main" / "java" / "perdix" / "jobs" / "TraceSourceJob.java"
    ).is_file()
    ignore = (DOCKERFILE.parent / "Dockerfile.dockerignore").read_text()
    assert "!jobs/trace-source/src/" in ignore and "!traces/*.csv" in ignore
    # The image's Flink is the one the lab compiles and measures against.
    match = re.search(r"ARG FLINK_IMAGE=flink:(\d+\.\d+)", text)
    assert match and match.group(1) == example_values()["image"]["tag"]
    lab_flink = [p.name for p in (flink_home() / "lib").glob("flink-dist-*.jar")]
    assert lab_flink and lab_flink[0].startswith(f"flink-dist-{match.group(1)}."), lab_flink
