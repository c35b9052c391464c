"""The bad-input suite: every class of bad input a user can hand ``perdix`` exits 2 with one line.

Commands run as subprocesses of the installed ``perdix`` (the entry point a user runs), each on a tiny
input so it fails or finishes in seconds. Each case asserts: exit code 2, exactly one line on stderr that
names what is wrong and where (the file, line, key, variable or flag), and no traceback anywhere.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from tests.fixtures.k8s import kube_api, kubeconfig  # noqa: F401  (fixtures)

PERDIX = Path(sys.executable).parent / "perdix"
NOBODY = 65534
"""The uid and gid a read-only directory is tried as: root writes through any mode bits."""


def run_perdix(
    *args: str | Path,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    as_nobody: bool = False,
    timeout: float = 180,
) -> subprocess.CompletedProcess[str]:
    """``perdix ARGS`` in ``cwd`` with ``env`` added to a clean PERDIX_-free environment."""
    environment = {name: value for name, value in os.environ.items() if not name.upper().startswith("PERDIX_")}
    environment.update(env or {})
    command: list[str | Path] = [PERDIX, *args]
    if as_nobody and os.geteuid() == 0:
        # Caches the lab writes on import must be writable by the user the command runs as.
        cache = cwd / ".cache"
        cache.mkdir(exist_ok=True)
        cache.chmod(0o777)
        environment.update(NUMBA_CACHE_DIR=str(cache), MPLCONFIGDIR=str(cache), HOME=str(cache))
        command = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *command]
    return subprocess.run(
        [str(part) for part in command], cwd=cwd, env=environment, capture_output=True, text=True, timeout=timeout
    )


def assert_one_line(result: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """Exit 2, one ``perdix: error:`` line on stderr containing every fragment, no traceback; the line."""
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    assert len(lines) == 1, result.stderr
    line = lines[0]
    assert line.startswith("perdix: error: "), line
    for fragment in fragments:
        assert fragment in line, (fragment, line)
    return line


def tree(path: Path) -> dict[str, bytes | None]:
    """Every file and directory under ``path`` with its bytes (None for a directory)."""
    if not path.exists():
        return {}
    if path.is_file():
        return {".": path.read_bytes()}
    return {
        str(item.relative_to(path)): (item.read_bytes() if item.is_file() else None) for item in sorted(path.rglob("*"))
    }


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A scratch directory every user may enter (pytest's own are its owner's alone): the read-only cases
    run as another user."""
    path = Path(tempfile.mkdtemp(prefix="perdix-badinput-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        for item in path.rglob("*"):
            if item.is_dir():
                item.chmod(0o755)
        shutil.rmtree(path)


def good_trace(path: Path, seconds: int = 600, rate: float = 2000.0) -> Path:
    """A small valid trace of ``seconds``."""
    path.write_text("time_s,rate\n" + "".join(f"{t},{rate}\n" for t in range(0, seconds + 1, 60)))
    return path


__all__: Sequence[str] = ("PERDIX", "assert_one_line", "good_trace", "run_perdix", "tree")
