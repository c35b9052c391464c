"""The chart tests need the real helm: without it they fail and say how to install it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.helm import chart


def test_missing_helm_fails_with_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chart, "ROOT", tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(pytest.fail.Exception, match="install-helm.sh"):
        chart.helm_binary()


def test_installed_helm_is_helm_3() -> None:
    result = subprocess.run(
        [chart.helm_binary(), "version", "--template", "{{.Version}}"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0 and result.stdout.startswith("v3."), result.stdout + result.stderr
