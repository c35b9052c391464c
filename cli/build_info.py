"""What ``perdix version`` prints: the installed version and the git revision this copy was built from.

scripts/build-image.sh writes ``cli/build_info.json`` into the wheel it builds (the image installs that
wheel); a checkout asks git; anything else says ``unknown``.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from importlib import metadata, resources
from pathlib import Path

BUILD_INFO = "build_info.json"
PACKAGES = ("agent", "cli", "lab", "models", "planner", "spark", "simulator")
_REVISION = re.compile(r"[0-9a-f]{7,40}(-dirty)?|unknown")


@dataclass(frozen=True)
class BuildInfo:
    """The version and the revision of this copy of Perdix."""

    version: str
    revision: str

    def line(self) -> str:
        """``perdix 0.1.0 (revision 0123456789ab)``."""
        return f"perdix {self.version} (revision {self.revision})"


def _installed_version() -> str:
    try:
        return metadata.version("perdix")
    except metadata.PackageNotFoundError:
        return "unknown"


def parse_revision(text: str) -> str | None:
    """The revision a build_info.json holds; None for a file that is not of that shape."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    revision = data.get("revision") if isinstance(data, dict) else None
    return revision if isinstance(revision, str) and _REVISION.fullmatch(revision) else None


def _baked_revision() -> str | None:
    try:
        return parse_revision(resources.files("cli").joinpath(BUILD_INFO).read_text())
    except OSError:
        return None


def _git_revision(root: Path) -> str | None:
    """HEAD of the checkout that holds these sources, ``-dirty`` when they differ from it; None outside one."""
    if not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, timeout=5
        )
        if head.returncode != 0:
            return None
        changed = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", *PACKAGES, "pyproject.toml"],
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return head.stdout.strip() + ("-dirty" if changed.stdout.strip() else "")


def build_info() -> BuildInfo:
    """This copy's version and revision: baked into the wheel, else git's, else ``unknown``."""
    revision = _baked_revision() or _git_revision(Path(__file__).resolve().parent.parent) or "unknown"
    return BuildInfo(version=_installed_version(), revision=revision)
