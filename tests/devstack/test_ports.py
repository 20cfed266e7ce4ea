"""Ports for the suite's services: below the ephemeral range, and one stripe per xdist worker."""

from __future__ import annotations

import pytest

from devstack import ports


def test_each_xdist_worker_draws_its_ports_from_a_stripe_no_other_worker_touches(monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "3")
    drawn: dict[int, set[int]] = {}
    for worker in range(3):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{worker}")
        drawn[worker] = {ports.free_ports(2) for _ in range(40)}
    low, _ = ports._ephemeral_range()

    spans = [(min(found), max(found)) for found in drawn.values()]
    assert all(low > high for _, high in spans)
    assert spans[0][1] < spans[1][0] and spans[1][1] < spans[2][0], "the stripes overlap"


@pytest.mark.parametrize("worker, count", [("", ""), ("gw0", "1"), ("master", "3"), ("gw7", "3")])
def test_without_a_worker_of_several_the_whole_range_is_used(monkeypatch, worker, count):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", count)
    pool = range(10240, 30000)

    assert ports._stripe(pool) == pool
