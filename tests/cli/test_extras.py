"""Packaging follows the layers: the daemon imports nothing from the extras; a command whose extra is missing
exits 2 with one line naming it.

Each check runs in a fresh interpreter, so what another test imported does not count. A missing extra is
made real with a meta-path finder that refuses its modules, as an install without the extra would.
"""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import agent
from cli.extras import EXTRA_MODULES, missing_modules
from tests.conftest import ROOT, TRACES

LAB_AND_SPARK_ONLY = ("numba", "llvmlite", "matplotlib", "pulp", "pyspark")
"""Modules that only the lab and batch extras install (pyarrow is a base dependency: the hot reload reads
the model registry through it)."""

BLOCKER = """
import sys
blocked = set(sys.argv[1].split(","))
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Refuse())
sys.argv = ["perdix", *sys.argv[2:]]
from cli import main
main()
"""


def _python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT, timeout=120)


def _loaded_after(code: str) -> dict[str, list[str]]:
    probe = (
        code + "\nimport json, sys\n"
        f"print(json.dumps(sorted(m for m in {LAB_AND_SPARK_ONLY + ('pyarrow',)!r} if m in sys.modules)))"
    )
    result = _python(probe)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def test_every_daemon_module_imports_without_the_extras() -> None:
    """Every module of agent/ (what `perdix run` loads, whatever its settings), with the models and planner
    parts they pull in: none of the lab's or the batch side's libraries is imported."""
    modules = sorted(m.name for m in pkgutil.walk_packages(agent.__path__, "agent."))
    assert "agent.daemon" in modules and "agent.model_reload" in modules
    loaded = _loaded_after("import cli, cli.daemon\n" + "\n".join(f"import {m}" for m in modules))
    assert not set(loaded) & set(LAB_AND_SPARK_ONLY), loaded


def test_perdix_run_help_loads_no_extra_and_no_registry_filesystem() -> None:
    result = _python(BLOCKER, ",".join(LAB_AND_SPARK_ONLY + ("pyarrow",)), "run", "--help")
    assert result.returncode == 0, result.stderr
    assert "--dry-run" in result.stdout
    assert (
        _loaded_after(
            "import sys\nsys.argv = ['perdix', 'run', '--help']\nfrom cli import app\n"
            "try:\n    app()\nexcept SystemExit:\n    pass"
        )
        == []
    )


@pytest.mark.parametrize(
    ("blocked", "args", "extra"),
    [
        ("numba", ["simulate", "--trace", str(TRACES / "bank_calls.csv"), "--hours", "0.1"], "lab"),
        ("matplotlib", ["evaluate", "--trace", str(TRACES / "bank_calls.csv"), "--hours", "0.1"], "lab"),
        ("pulp", ["capacity-plan", "--target-rate", "1000", "--out", "/nonexistent/model.json"], "lab"),
        ("pyspark", ["retrain", "--history", "/nonexistent/history", "--registry", "/nonexistent/registry"], "batch"),
        (
            "pyarrow",
            ["export-history", "--out", "/nonexistent/history", "--job", "j", "--prometheus", "http://127.0.0.1:1"],
            "batch",
        ),
        # export-history --from-simulation replays through the simulator: the batch side and the lab.
        (
            "numba",
            [
                "export-history",
                "--out",
                "/nonexistent/h",
                "--job",
                "j",
                "--from-simulation",
                str(TRACES / "bank_calls.csv"),
            ],
            "lab",
        ),
    ],
)
def test_a_command_without_its_extra_exits_2_with_one_line(
    blocked: str, args: list[str], extra: str, tmp_path: Path
) -> None:
    result = _python(BLOCKER, blocked, *args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert f"{args[0]} needs the '{extra}' extra ({blocked} not installed)" in lines[0]
    assert lines[0].endswith(f"pip install 'perdix[{extra}]'")
    assert "Traceback" not in result.stderr + result.stdout


def test_the_dev_install_has_every_extra() -> None:
    """make setup installs all extras: nothing is reported missing here (else the checks above prove nothing)."""
    assert {extra: missing_modules(extra) for extra in EXTRA_MODULES} == {"lab": [], "batch": []}


def test_the_extras_named_by_the_cli_are_the_extras_of_pyproject() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    names = {
        extra: {r.split(">")[0].split("<")[0].split("=")[0].strip() for r in extras[extra]} for extra in EXTRA_MODULES
    }
    assert names == {"lab": {"numba", "matplotlib", "pulp"}, "batch": {"pyspark", "pyarrow"}}
    base = {r.split(">")[0].split("<")[0].split("=")[0].strip() for r in project["dependencies"]}
    assert not base & {"numba", "matplotlib", "pulp", "pyspark"}, base
    assert set(extras["all"]) == {"perdix[lab,batch]"}
    # The design card's packages stay dependencies of the project (base or an extra).
    every = base | set().union(*names.values())
    assert {
        "pmdarima",
        "numpy",
        "prometheus-api-client",
        "kubernetes",
        "pyspark",
        "pulp",
        "scikit-learn",
        "apscheduler",
        "structlog",
    } <= every
