"""The optimal schedule's compiled kernels never run a drain rule other than the simulator's."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

import lab.optimal


def _kernels_cached_in(monkeypatch: pytest.MonkeyPatch, directory: Path) -> None:
    monkeypatch.setattr(lab.optimal, "_step_rows", SimpleNamespace(_cache=SimpleNamespace(_cache_path=str(directory))))


def test_a_changed_drain_rule_drops_the_kernels_compiled_against_the_old_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _kernels_cached_in(monkeypatch, tmp_path)
    old = [tmp_path / "optimal._step_rows-690.py311.nbi", tmp_path / "optimal._step_rows-690.py311.1.nbc"]
    for path in [*old, tmp_path / "optimal.drain-0123456789abcdef.stamp"]:
        path.write_bytes(b"compiled against another rule")
    unrelated = tmp_path / "replay.run-10.py311.nbi"
    unrelated.write_bytes(b"another module's kernel")

    lab.optimal._drop_kernels_compiled_against_another_drain_rule()

    assert not any(path.exists() for path in old)
    stamps = list(tmp_path.glob("optimal.drain-*.stamp"))
    assert len(stamps) == 1 and stamps[0].name != "optimal.drain-0123456789abcdef.stamp"
    assert unrelated.exists()


def test_kernels_compiled_against_the_current_rule_are_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _kernels_cached_in(monkeypatch, tmp_path)
    lab.optimal._drop_kernels_compiled_against_another_drain_rule()
    kernel = tmp_path / "optimal._step_rows-690.py311.nbi"
    kernel.write_bytes(b"compiled against this rule")

    lab.optimal._drop_kernels_compiled_against_another_drain_rule()

    assert kernel.exists()
