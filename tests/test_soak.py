"""`make soak` inside the suite: 30 s of keyed and unkeyed purchases over two dev hosts while Table,
Blob, Brevo and the hosts themselves fail on a seeded schedule (soak/), then every invariant
checked. The seed is fixed, so a failure reproduces (`SOAK_SEED=<seed> SOAK_SECONDS=30 make soak`);
SOAK_SEED and SOAK_SECONDS choose another run."""

from __future__ import annotations

import os
from dataclasses import replace

from soak.run import Config, run

SEED = 1


def test_thirty_seconds_of_faults_over_two_hosts_break_no_invariant(tmp_path):
    config = replace(Config.from_env(dict(os.environ), seconds=30, seed=SEED), logs=tmp_path)

    outcome = run(config)

    assert outcome.ok, outcome.text()
