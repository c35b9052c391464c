"""free_port: a port for another process to bind seconds later, kept clear of outgoing connections."""

from __future__ import annotations

import random
import socket
from pathlib import Path

import pytest

from lab.flink import cluster
from lab.flink.cluster import ephemeral_port_range, free_port


def test_the_port_lies_below_the_ephemeral_range_and_is_free() -> None:
    low, _ = ephemeral_port_range()
    for _ in range(20):
        port = free_port()
        assert 20000 <= port < low
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_a_held_port_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster, "_HANDED_OUT", set())
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        draws = iter([taken, 21000])
        monkeypatch.setattr(random.SystemRandom, "randrange", lambda self, low, high: next(draws))
        assert free_port(ephemeral=(taken + 2000, 60999)) == 21000


def test_without_room_below_the_range_the_kernel_chooses() -> None:
    port = free_port(ephemeral=(1024, 65535))
    assert 1024 <= port <= 65535
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_the_range_is_read_from_the_kernel_or_linux_default(tmp_path: Path) -> None:
    custom = tmp_path / "range"
    custom.write_text("40000\t50000\n")
    assert ephemeral_port_range(custom) == (40000, 50000)
    assert ephemeral_port_range(tmp_path / "missing") == (32768, 60999)
    custom.write_text("garbage\n")
    assert ephemeral_port_range(custom) == (32768, 60999)


def test_a_port_is_never_handed_out_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    # Two JVMs given one port: the second's reporter cannot bind, and the first's would answer for both.
    monkeypatch.setattr(cluster, "_HANDED_OUT", set())
    draws = iter([21000, 21000, 21001])
    monkeypatch.setattr(random.SystemRandom, "randrange", lambda self, low, high: next(draws))
    assert (free_port(), free_port()) == (21000, 21001)
