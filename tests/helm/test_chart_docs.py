"""What the deployment guide, the examples and NOTES.txt tell an operator to run is what the chart accepts."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.helm.chart import EXAMPLE_OF_MODE, EXAMPLES, ROOT, helm_binary, one, run_helm

GUIDE = ROOT / "docs" / "deployment.md"


def install_commands(text: str) -> list[str]:
    """Every `helm install` command of the text's bash blocks and comments, continuation lines joined."""
    joined = re.sub(r"\\\n\s*", " ", text)
    return [
        line.strip().lstrip("#").strip()
        for line in joined.splitlines()
        if line.strip().lstrip("#").strip().startswith("helm install ")
    ]


GUIDE_COMMANDS = install_commands(GUIDE.read_text())
EXAMPLE_COMMANDS = {path.stem: install_commands(path.read_text()) for path in sorted(EXAMPLES.glob("*.yaml"))}


def template(command: str) -> tuple[list[dict], str]:
    """Run an install command as `helm template` with its own flags; (objects, values file's mode)."""
    words = shlex.split(command)
    assert words[:2] == ["helm", "install"], command
    release, chart, *flags = words[2:]
    assert (ROOT / chart).resolve() == (ROOT / "helm" / "perdix").resolve(), command
    namespace = flags[flags.index("-n") + 1]
    flags = [flag for flag in flags if flag != "--create-namespace"]
    del flags[flags.index("-n") : flags.index("-n") + 2]
    files = [flags[i + 1] for i, flag in enumerate(flags) if flag == "-f"]
    args = [str(ROOT / flag) if i > 0 and flags[i - 1] == "-f" else flag for i, flag in enumerate(flags)]
    result = run_helm("template", release=release, namespace=namespace, extra=args, example=None)
    assert result.returncode == 0, f"{command}\n{result.stderr}"
    mode = yaml.safe_load((ROOT / files[0]).read_text())["mode"] if files else "application"
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc], mode


def test_the_guide_installs_every_mode_with_its_example() -> None:
    used = {Path(shlex.split(c)[shlex.split(c).index("-f") + 1]).stem for c in GUIDE_COMMANDS if " -f " in c}
    assert used == set(EXAMPLE_OF_MODE.values()), GUIDE_COMMANDS


@pytest.mark.parametrize("command", GUIDE_COMMANDS, ids=[shlex.split(c)[2] for c in GUIDE_COMMANDS])
def test_each_command_of_the_guide_renders(command: str) -> None:
    objects, mode = template(command)
    settings = yaml.safe_load(
        one(
            objects,
            "ConfigMap",
            next(o["metadata"]["name"] for o in objects if o["metadata"]["name"].endswith("-config")),
        )["data"]["perdix.yaml"]
    )
    assert settings["dry_run"] is True, "the guide installs in dry-run"
    for word in shlex.split(command):
        if word.startswith("image.repository="):
            perdix = [
                c
                for o in objects
                if o["kind"] == "Deployment"
                for c in o["spec"]["template"]["spec"]["containers"]
                if c["name"] == "perdix"
            ]
            assert perdix and perdix[0]["image"] == f"{word.split('=', 1)[1]}:0.1.0"
    assert mode in EXAMPLE_OF_MODE


@pytest.mark.parametrize("example", sorted(EXAMPLE_COMMANDS))
def test_each_example_says_how_to_install_it_and_that_renders(example: str) -> None:
    [command] = EXAMPLE_COMMANDS[example]
    assert f"-f helm/perdix/examples/{example}.yaml" in command
    _, mode = template(command)
    assert EXAMPLE_OF_MODE[mode] == example


def render_notes(tmp_path: Path, example: str) -> str:
    """NOTES.txt as `helm install` prints it: `helm template` skips NOTES, so a copy of the chart renders
    it through a template of its own (install --dry-run would need a cluster)."""
    copy = tmp_path / "perdix"
    shutil.copytree(ROOT / "helm" / "perdix", copy)
    notes = (copy / "templates" / "NOTES.txt").read_text()
    (copy / "templates" / "zz-notes.yaml").write_text(
        '{{- define "test.notes" -}}\n'
        + notes
        + '\n{{- end }}\nkind: Notes\ntext: {{ include "test.notes" . | toJson }}\n'
    )
    helm = helm_binary()
    done = subprocess.run(
        [
            helm,
            "template",
            "orders",
            str(copy),
            "-n",
            "streaming",
            "--kube-version",
            "1.30.0",
            "-f",
            str(EXAMPLES / f"{example}.yaml"),
            "--show-only",
            "templates/zz-notes.yaml",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return str(yaml.safe_load(done.stdout)["text"])


@pytest.mark.parametrize("mode", list(EXAMPLE_OF_MODE))
def test_notes_say_how_to_watch_the_recommendations_of_the_mode(tmp_path: Path, mode: str) -> None:
    notes = render_notes(tmp_path, EXAMPLE_OF_MODE[mode])
    assert f"installed in mode {mode}." in notes and "DRY-RUN is ON" in notes
    assert "--set perdix.dryRun=false" in notes
    if mode == "rest":
        # Nothing on Kubernetes is rescaled: the recommendations are in the log, not in Events.
        assert "the Flink job clicks at http://clicks-jobmanager.streaming.svc:8081" in notes
        assert "grep rescale.dry_run" in notes and "RescaleRecommended" not in notes
    else:
        assert "get events --field-selector reason=RescaleRecommended" in notes
