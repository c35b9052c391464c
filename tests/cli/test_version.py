"""``perdix version``: the version and the git revision the copy was built from (the image test checks the
revision baked into the image's wheel)."""

from __future__ import annotations

import subprocess
import sys

from cli.build_info import build_info, parse_revision
from tests.conftest import ROOT


def test_a_checkout_reports_its_git_head() -> None:
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    info = build_info()
    assert info.version == "0.1.0"
    assert info.revision in (head, f"{head}-dirty")
    result = subprocess.run(
        [sys.executable, "-m", "cli", "version"], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert result.stdout.strip() == f"perdix 0.1.0 (revision {info.revision})"


def test_the_baked_build_info_is_read_only_when_well_formed() -> None:
    assert parse_revision('{"version": "0.1.0", "revision": "0123456789ab"}') == "0123456789ab"
    assert parse_revision('{"version": "0.1.0", "revision": "0123456789ab-dirty"}') == "0123456789ab-dirty"
    assert parse_revision('{"revision": "unknown"}') == "unknown"
    for bad in ("", "not json", "[]", '{"revision": 7}', '{"revision": "$(rm -rf /)"}', '{"version": "0.1.0"}'):
        assert parse_revision(bad) is None, bad
