"""The Dockerfile agrees with the chart and the package (no Docker engine here, so it is read, not built)."""

from __future__ import annotations

import fnmatch
import re
import tomllib

from tests.helm.chart import ROOT, perdix_pod, render

DOCKERFILE = (ROOT / "Dockerfile").read_text()
DOCKERIGNORE = [
    line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines() if line.strip() and not line.startswith("#")
]


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


def ignored(path: str) -> bool:
    """Whether the build context leaves out a path (last matching .dockerignore rule wins)."""
    excluded = False
    for rule in DOCKERIGNORE:
        negate = rule.startswith("!")
        pattern = rule.lstrip("!").rstrip("/")
        if fnmatch.fnmatch(path, pattern) or path.startswith(pattern + "/"):
            excluded = not negate
    return excluded


def test_multi_stage_and_non_root_with_the_chart_uid() -> None:
    build, *_, runtime = stages()
    assert len(stages()) >= 2
    users = [line.split()[1] for line in runtime if line.upper().startswith("USER ")]
    assert users, "the runtime stage must set USER"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) > 0, "USER must be a non-root numeric uid (runAsNonRoot needs a number)"
    _, _, container = perdix_pod(render())
    assert container["securityContext"]["runAsUser"] == int(uid)
    assert any("COPY --from=" in line for line in runtime), "the runtime stage copies the build's result"


def test_every_package_is_copied_and_in_the_context() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = [pattern.rstrip("*") for pattern in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]]
    copied = {line.split()[1] for line in stages()[0] if line.upper().startswith("COPY ")}
    for package in packages:
        assert package in copied, f"Dockerfile does not copy {package}/"
        assert not ignored(f"{package}/__init__.py"), f".dockerignore leaves out {package}/"
    for needed in ("pyproject.toml", pyproject["project"]["readme"]):
        assert not ignored(needed)
    for private in (".venv/bin/python", ".git/HEAD", ".tools/bin/helm", "tests/conftest.py", "agent/__pycache__/x.pyc"):
        assert ignored(private), f".dockerignore lets {private} into the build context"


def test_entrypoint_runs_the_perdix_command() -> None:
    runtime = stages()[-1]
    assert 'ENTRYPOINT ["perdix"]' in runtime
    _, _, container = perdix_pod(render())
    assert container["args"][:2] == ["run", "--config"]

