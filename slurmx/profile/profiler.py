"""The profiler the daemon drives: which samples to run, what they showed, and each variant's current estimate.

One object per daemon; every call takes the time explicitly and nothing here does I/O, so the daemon's loop
(observe -> profile -> decide -> enforce) and the tests drive it the same way:

    requests = profiler.plan(groups, now)        # new samples to submit (history first, then the cap)
    profiler.observe(sample_id, seconds, ...)    # a sample finished (sacct elapsed) or was cut
    for sample_id in profiler.to_cut(running, now): scancel it, then observe(..., finished=False)
    profiler.on_progress(group, kind, report)    # a running variant's progress file
    profiler.estimates(group)                    # kind -> Estimate, for the ClusterView and `slurmx explain`

Which estimate wins for a variant: its own progress while it runs, else history or samples, else the declared one;
whichever it is, at most the variant's time limit (`estimator.bounded`): every source is a user's claim in the end.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from slurmx.core.resources import Resources
from slurmx.profile.estimator import (
    Estimate,
    EstimatorParams,
    ProgressReport,
    SampleRun,
    Source,
    bounded,
    cut_deadline,
    estimate_from_samples,
    update_from_progress,
)
from slurmx.profile.history import History, JobKey
from slurmx.profile.sampling import (
    GroupToProfile,
    SampleRequest,
    SamplingParams,
    VariantToProfile,
    sample_requests,
    within_cap,
)

__all__ = ["Profiler"]

DECLARED_UNCERTAINTY = 1.0


@dataclass(slots=True)
class _VariantState:
    variant: VariantToProfile
    key: JobKey
    pending: list[SampleRequest] = field(default_factory=list)  # planned, not yet handed out (cap)
    issued: dict[int, SampleRequest] = field(default_factory=dict)
    runs: dict[int, SampleRun] = field(default_factory=dict)
    estimate: Estimate | None = None
    abandoned: bool = False  # a sample failed: no estimate from samples, the declared one stands


class Profiler:
    """Sample runs, history and progress combined into one estimate per variant."""

    def __init__(self, history: History | None = None, sampling: SamplingParams | None = None,
                 estimator: EstimatorParams | None = None) -> None:
        self.history = history or History()
        self.sampling = sampling or SamplingParams()
        self.estimator = estimator or EstimatorParams(cut_factor=self.sampling.cut_factor)
        self._groups: dict[str, dict[str, _VariantState]] = {}

    # ---- planning -------------------------------------------------------------------------------------

    def plan(self, groups: Iterable[GroupToProfile], now: float) -> list[SampleRequest]:
        """New samples to submit now, in group arrival order, as many as the profiling cap leaves room for.

        A group seen for the first time gets history estimates where fresh runs exist and samples for the rest.
        """
        for group in sorted(groups, key=lambda g: (g.submit_time, g.group_id)):
            if group.group_id not in self._groups:
                self._groups[group.group_id] = self._start(group, now)
        held, count = self._outstanding()
        out: list[SampleRequest] = []
        for variants in self._groups.values():
            for state in variants.values():
                # One sample of a variant at a time: short, then long (the simulator's model too), and the
                # rendered script's payload file, one per group and kind, is never rewritten under a running run.
                busy = any(index not in state.runs for index in state.issued)
                if state.pending and not busy and within_cap(held, count, state.pending[0].request, self.sampling):
                    request = state.pending.pop(0)
                    state.issued[request.index] = request
                    held, count = held + request.request, count + 1
                    out.append(request)
        return out

    def _start(self, group: GroupToProfile, now: float) -> dict[str, _VariantState]:
        states: dict[str, _VariantState] = {}
        for variant in group.variants:
            script_hash = group.script_hash if variant.script_hash is None else variant.script_hash
            key = JobKey(group.user, group.name, script_hash, variant.kind)
            state = _VariantState(variant, key)
            state.estimate = self.history.estimate(key, now, variant.total_steps)
            if state.estimate is None:
                state.pending = sample_requests(group, variant, self.sampling)
            states[variant.kind] = state
        return states

    def _outstanding(self) -> tuple[Resources, int]:
        held, count = Resources(), 0
        for variants in self._groups.values():
            for state in variants.values():
                for index, request in state.issued.items():
                    if index not in state.runs:
                        held, count = held + request.request, count + 1
        return held, count

    # ---- results --------------------------------------------------------------------------------------

    def observe(self, sample_id: str, seconds: float, finished: bool = True, steps_done: int = 0,
                step_seconds: float | None = None) -> None:
        """A sample ended: `seconds` of wall time (`readings.sample_wall_seconds`, else sacct's elapsed), cut early
        unless `finished`; `step_seconds` its in-run step time (`readings.sample_step_seconds`) when known.

        Unknown ids (another daemon's samples, a group already forgotten) are ignored.
        """
        group_id, _, rest = sample_id.rpartition(".")
        group_id, _, kind = group_id.rpartition(".")
        state = self._groups.get(group_id, {}).get(kind)
        if state is None or not rest.isdigit() or int(rest) not in state.issued:
            return
        request = state.issued[int(rest)]
        state.runs[request.index] = SampleRun(request.steps, seconds, finished, steps_done, step_seconds)
        if not finished:
            state.pending.clear()  # the variant is known to be long: its other sample is not needed
        if _settled(state) and state.variant.total_steps:
            state.estimate = estimate_from_samples(list(state.runs.values()), state.variant.total_steps,
                                                   self.estimator)

    def abandon(self, sample_id: str) -> None:
        """A sample failed (not cut, no timing): stop sampling its variant, whose declared estimate stands.

        Without this a failed sample would keep its group unready, hidden from the policy, for ever."""
        group_id = sample_id.rpartition(".")[0]
        group_id, _, kind = group_id.rpartition(".")
        state = self._groups.get(group_id, {}).get(kind)
        if state is not None:
            state.pending.clear()
            state.abandoned = True

    def wants(self, sample_id: str) -> bool:
        """Whether the sample is still to run or running: a queued sample that is neither is not needed any more
        (history answered, the variant was cut or abandoned, or the group was forgotten)."""
        group_id, _, index = sample_id.rpartition(".")
        group_id, _, kind = group_id.rpartition(".")
        state = self._groups.get(group_id, {}).get(kind)
        if state is None or not index.isdigit():
            return False
        i = int(index)
        return any(r.index == i for r in state.pending) or (i in state.issued and i not in state.runs)

    def known(self, group_id: str) -> bool:
        """Whether `plan` has seen the group."""
        return group_id in self._groups

    def sources(self, group_id: str) -> dict[str, str]:
        """Kind -> how its estimate is being made: 'history', 'sampling', 'sampled', 'declared' (for explain)."""
        out = {}
        for kind, state in self._groups.get(group_id, {}).items():
            if state.estimate is not None and state.estimate.source is Source.HISTORY:
                out[kind] = "history"
            elif state.issued or state.pending:
                out[kind] = "sampled" if _settled(state) and not state.abandoned else \
                    "failed" if state.abandoned else "sampling"
            else:
                out[kind] = "declared"
        return out

    def to_cut(self, running: Mapping[str, float], now: float) -> list[str]:
        """Samples (id -> start time) that ran past `cut_factor` times the same sample of their fastest sibling."""
        out = []
        for sample_id, started in sorted(running.items()):
            group_id, _, rest = sample_id.rpartition(".")
            group_id, _, kind = group_id.rpartition(".")
            own = self._groups.get(group_id, {}).get(kind)
            if own is not None and any(not r.finished for r in own.runs.values()):
                out.append(sample_id)  # its sibling sample was cut: the variant is known to be long
                continue
            siblings = [v.runs[int(rest)].seconds for k, v in self._groups.get(group_id, {}).items()
                        if k != kind and rest.isdigit() and int(rest) in v.runs and v.runs[int(rest)].finished]
            if siblings and now - started > cut_deadline(min(siblings), self.estimator):
                out.append(sample_id)
        return out

    def on_progress(self, group_id: str, kind: str, report: ProgressReport) -> Estimate | None:
        """A running variant's progress: its estimate follows the measurement (and is capped by it)."""
        state = self._groups.get(group_id, {}).get(kind)
        if state is None:
            return None
        state.estimate = update_from_progress(self._best(state), report, self.estimator)
        return self._best(state)

    # ---- answers --------------------------------------------------------------------------------------

    def estimates(self, group_id: str) -> dict[str, Estimate]:
        """Kind -> the best estimate so far (declared when nothing better exists; absent when nothing at all)."""
        out = {}
        for kind, state in self._groups.get(group_id, {}).items():
            best = self._best(state)
            if best is not None:
                out[kind] = best
        return out

    def ready(self, group_id: str) -> bool:
        """Whether the group's samples are all done (or none were needed): AlloX may schedule it now.

        False for a group `plan` has not seen yet."""
        variants = self._groups.get(group_id)
        return variants is not None and all(_settled(s) for s in variants.values())

    def overhead(self, group_id: str) -> tuple[float, float]:
        """Seconds all samples of the group ran, and that as a fraction of its fastest variant's estimate."""
        variants = self._groups.get(group_id, {})
        spent = sum(run.seconds for s in variants.values() for run in s.runs.values())
        fastest = min((e.seconds for e in self.estimates(group_id).values()), default=0.0)
        return spent, spent / fastest if fastest > 0 else 0.0

    def forget(self, group_ids: Sequence[str]) -> None:
        """Drop finished groups (the daemon's store keeps what outlives them)."""
        for group_id in group_ids:
            self._groups.pop(group_id, None)

    @staticmethod
    def _best(state: _VariantState) -> Estimate | None:
        best = state.estimate
        if best is None and state.variant.declared_s is not None:
            best = Estimate(state.variant.declared_s, Source.DECLARED, DECLARED_UNCERTAINTY,
                            detail="declared by the job (not measured)")
        return None if best is None else bounded(best, state.variant.time_limit_s)


def _settled(state: _VariantState) -> bool:
    """No more samples will tell us anything: all planned ones ended, or one was cut."""
    if state.abandoned:
        return True
    if state.pending:
        return False
    return len(state.runs) == len(state.issued) or any(not r.finished for r in state.runs.values())
