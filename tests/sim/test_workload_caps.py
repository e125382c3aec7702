"""A generator asked for more jobs than a run may have, or for an infinite value, refuses at once in one line: a
typo (one zero too many) must not take the machine's memory for minutes before failing."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from slurmx.sim.workloads.allox import AlloxParams
from slurmx.sim.workloads.common import MAX_JOBS
from slurmx.sim.workloads.fitgpp import FitgppParams
from slurmx.sim.workloads.mlfs import MlfsParams
from slurmx.sim.workloads.synergy import SynergyParams
from slurmx.sim.workloads.zhao import ZhaoParams


@pytest.mark.parametrize(("model", "params"), [
    (FitgppParams, {"n_jobs": MAX_JOBS + 1}),
    (MlfsParams, {"n_jobs": 10**12}),
    (SynergyParams, {"n_jobs": 10**9}),
    (AlloxParams, {"n_users": 1000, "jobs_per_user": 10**4}),
    (ZhaoParams, {"n_batches": 10**4, "jobs_per_batch": 10**4}),
])
def test_too_many_jobs_is_refused_before_any_is_made(model: type, params: dict[str, int]) -> None:
    with pytest.raises(ValidationError, match=r"over the 5,000,000 a run may have; lower the job count"):
        model(**params)


def test_at_the_cap_is_accepted_and_infinity_is_not() -> None:
    assert FitgppParams(n_jobs=MAX_JOBS).planned_jobs() == MAX_JOBS
    with pytest.raises(ValidationError, match="finite"):
        FitgppParams(load=float("inf"))
