"""AlloX (Le et al., EuroSys '20) and AlloX+: which variant of a job runs, and when, on interchangeable kinds.

AlloX sees the cluster as *machines*: every unit of a GRES kind (each GPU, each accelerator) and every whole
node of a kind without GRES (a CPU node), any number of kinds. A machine busy with a slurmx job becomes free
at `start_time + estimate_s` (now if overdue); an idle one is free now. Each decision solves the paper's
min-cost matching (`slurmx.policies.matching`) over the waiting jobs of the users with the lowest progress,
with cost `k * p(j, kind) + ω_i - a_j` (time measured from now: ω_i >= 0 is when machine i frees, a_j <= 0
when job j arrived, so the cost is the job's planned flow time), and starts only the first planned job of
an idle machine (a rolling horizon: everything else is re-planned at the next decision). A job planned on
a busy machine waits for it, even while other machines idle: AlloX is not work-conserving on purpose.

Fairness (§3.3): a user's progress is the sum of her running jobs' values, a job's value its dominant share
on its favoured kind discounted by how much slower the kind it runs on is. Only the ceil(α·n) users with
the lowest progress are considered; α doubles while nothing can start (§4.4). The machine model and the
helpers the baselines share are in `allox_model` (re-exported here).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Generic, Literal, TypeVar

import numpy as np
from pydantic import Field

from slurmx.core.actions import Note, Plan, Start
from slurmx.core.model import ClusterView
from slurmx.policies.allox_model import (
    Cluster,
    Job,
    Machine,
    SamplesArgs,
    SamplesOrder,
    SampleSort,
    _cap_jobs,
    dominant_share,
    favoured,
    job_value,
    job_value_on,
    known,
    matching_instance,
    read_cluster,
    select_users,
    start_samples,
    user_progress,
)
from slurmx.policies.base import Capabilities, register
from slurmx.policies.matching import Instance, solve

__all__ = [
    "Allox",
    "AlloxArgs",
    "AlloxPlus",
    "AlloxPlusArgs",
    "AlphaArgs",
    "AlphaRounds",
    "Cluster",
    "Job",
    "Machine",
    "SampleSort",
    "SamplesArgs",
    "SamplesOrder",
    "dominant_share",
    "favoured",
    "job_value",
    "known",
    "matching_instance",
    "read_cluster",
    "select_users",
    "start_samples",
    "user_progress",
]


# ---------------------------------------------------------------------------------------------- policies


class AlphaArgs(SamplesArgs):
    """The fairness knobs AlloX and AlloX+ share (the authors' AlloX+ uses the α subset too).

    - `alpha`: fraction of users (lowest progress first) whose jobs are considered; 1 = no fairness constraint.
    - `alpha_over`: what α is a fraction of: users with waiting jobs (authors' simulator, default) or all
      users in the view (their Kubernetes scheduler).
    - `widen_alpha`: double α while nothing can start, until α = 1 (§4.4; not reset within a decision).
    - `ties`: users with equal progress go by who has waited longest ("earliest_waiting"), or by name
      ("by_name": the authors' simulator, its queue order; an artifact, off by default).
    """

    alpha: float = Field(0.1, ge=0.0, le=1.0)
    alpha_over: Literal["waiting", "all"] = "waiting"
    widen_alpha: bool = True
    ties: Literal["earliest_waiting", "by_name"] = "earliest_waiting"


def _population(view: ClusterView, cluster: Cluster, over: str) -> int:
    if over == "all":
        return len({g.user for g in (*view.pending_groups(), *view.running_groups())})
    return len({j.user for j in cluster.jobs})


def _widen(alpha: float, population: int) -> float:
    """Double α (at least to two users' worth, so α = 0 widens too), capped at 1."""
    return min(1.0, max(2.0 * alpha, 2.0 / max(population, 1)))


# a start a round chooses: machine index, job, kind, reason, and until when (s from now) the machine counts as
# busy for the rest of the decision (the job's estimate; AlloX's `omega_planned`: every job planned on it)
Choice = tuple[int, Job, str, str, float]
AA = TypeVar("AA", bound=AlphaArgs)


@dataclass(frozen=True)
class AlphaRounds(Generic[AA]):
    """The decision loop AlloX and AlloX+ share; they differ only in `pick`. Each round selects the α users
    with the lowest progress and lets `pick` choose starts among their jobs; the starts are made and progress
    updated, so the next round sees them. A round that picks nothing doubles α (§4.4) until α = 1."""

    args: AA
    capabilities: ClassVar[Capabilities] = Capabilities()  # one node each, no placement rules, profiled

    def schedule(self, view: ClusterView, now: float) -> Plan:
        cluster = read_cluster(view, now)
        progress = user_progress(view, cluster, samples=not self.args.samples_first)
        actions: list[Start] = start_samples(cluster) if self.args.samples_first else []
        alpha = self.args.alpha
        while cluster.jobs and cluster.idle():
            population = _population(view, cluster, self.args.alpha_over)
            users = select_users(cluster.jobs, progress, alpha, population, self.args.ties)
            choices = self.pick(cluster, users, alpha, now)
            if not choices:
                if not self.args.widen_alpha or alpha >= 1.0:
                    break
                alpha = _widen(alpha, population)
                continue
            for i, job, kind, reason, busy_s in choices:
                start = cluster.start(i, job, kind, reason)
                if start is not None:
                    machine = cluster.machines[i]
                    cluster.machines[i] = Machine(machine.kind, machine.node, machine.unit, busy_s, False)
                    actions.append(start)
                    progress[job.user] = progress.get(job.user, 0.0) + job_value_on(job, kind, cluster)
        return Plan(tuple(actions), (*cluster.notes, *self.closing_notes(cluster)))

    def pick(self, cluster: Cluster, users: set[str], alpha: float, now: float) -> list[Choice]:
        """The starts of one round among the jobs of `users` (empty: nothing can start at this α)."""
        raise NotImplementedError

    def closing_notes(self, cluster: Cluster) -> tuple[Note, ...]:
        """Notes on what the decision left waiting."""
        return ()


class AlloxArgs(AlphaArgs):
    """AlloX's knobs: `alpha`, `alpha_over`, `widen_alpha` (AlphaArgs), and the open choices of the digest.
    Defaults follow the paper's simulation.

    - `n_max`: match at most this many jobs, the next shortest per kind in turn (authors' simulator: 50);
      None matches all (the solver is exact and fast, see docs/policies/allox.md for when to cap).
    - `starts_per_solve`: "one" re-solves after every start, with progress updated (authors' simulator);
      "all" starts the first planned job of every idle machine from one solve.
    - `sample_machines_free` (off by default: an artifact): as in the authors' simulator, whose matching
      sets every machine not running a scheduled job free now, so a machine a profiling sample holds
      (`samples_first`) is planned as free now, though no job starts on it. Ours knows the node: a machine
      counts as held by samples when every job of its kind running on its node is a sample (exact for one
      unit per node, as in the reproduction's GPU nodes).
    - `first_start` (with "one"): which idle machine's first planned job starts: "shortest" (ours), or
      "base_kind" (the authors' simulator, which goes down the machine index, CPU nodes after the GPUs:
      a base-kind machine first, then the shortest).
    - `omega_planned` (off by default: an artifact): as in the authors' simulator, a machine that starts a
      job counts as busy until every job the solve planned on it would have run, not just the started one.
      Within a decision only: a pure policy cannot remember it for machines started at earlier decisions
      (theirs keeps it until the job ends; ours reads start + estimate from the view).
    - `books` (off by default: an artifact): their AlloX's bookkeeping across decisions, kept in the policy's
      memo: numbered machines, bookings until every planned job ends, progress as running sums, samples holding
      the lowest free numbers, their loop's user order and matching columns (`allox_books`). It replaces
      `starts_per_solve`, `ties`, `alpha_over`, `sample_machines_free`, `first_start` and `omega_planned`.
    """

    n_max: int | None = Field(None, ge=1)
    starts_per_solve: Literal["one", "all"] = "one"
    sample_machines_free: bool = False
    first_start: Literal["shortest", "base_kind"] = "shortest"
    omega_planned: bool = False
    books: bool = False


@dataclass(frozen=True)
class Allox(AlphaRounds[AlloxArgs]):
    """AlloX: min-cost matching over (machine, position), first planned job of each idle machine, α-fairness."""

    name: ClassVar[str] = "allox"

    def schedule(self, view: ClusterView, now: float) -> Plan:
        if self.args.books:
            from slurmx.policies.allox_books import schedule_with_books  # it builds on this module

            return schedule_with_books(self.args, view, now)
        return super().schedule(view, now)

    def closing_notes(self, cluster: Cluster) -> tuple[Note, ...]:
        waiting = len(cluster.jobs)
        return (Note(f"{waiting} jobs wait (planned on busy machines or users not selected)", kind="allox"),) \
            if waiting else ()

    def pick(self, cluster: Cluster, users: set[str], alpha: float, now: float) -> list[Choice]:
        """Solve the matching over the selected users' jobs; the first planned job of each idle machine
        (shortest first), or only the shortest of them in "one" mode."""
        jobs = _cap_jobs([j for j in cluster.jobs if j.user in users], self.args.n_max, cluster.kinds)
        firsts = self._first_jobs(cluster, jobs, now, self.args.sample_machines_free)
        if self.args.first_start == "base_kind":
            firsts.sort(key=lambda f: cluster.unit_gres.get(cluster.machines[f[0]].kind) is not None)
        if self.args.starts_per_solve == "one":
            firsts = firsts[:1]
        choices = []
        for i, job, planned in firsts:
            kind = cluster.machines[i].kind
            reason = f"allox: first of {len(planned)} planned on {kind} {cluster.machines[i].node}, α={alpha:g}"
            busy = sum(p.estimates[kind] for p in planned) if self.args.omega_planned else job.estimates[kind]
            choices.append((i, job, kind, reason, busy))
        return choices

    @staticmethod
    def _first_jobs(cluster: Cluster, jobs: list[Job], now: float, samples_free: bool = False
                    ) -> list[tuple[int, Job, list[Job]]]:
        """(idle machine, its first planned job, all its planned jobs), shortest planned job first; with
        `samples_free`, machines held by samples are planned as free now (`sample_machines_free`)."""
        if not jobs:
            return []
        instance = matching_instance(cluster, jobs, now)
        if samples_free and cluster.sample_nodes:
            held = [m.node in cluster.sample_nodes.get(m.kind, ()) and not m.idle for m in cluster.machines]
            instance = Instance(instance.proc, instance.arrival, instance.machine_type,
                                np.where(held, 0.0, instance.avail))
        solution = solve(instance, certify=False)
        queues = solution.queues(len(cluster.machines))
        firsts = [(i, jobs[queues[i][0]], [jobs[q] for q in queues[i]]) for i in cluster.idle() if queues[i]]
        return sorted(firsts, key=lambda f: (f[1].estimates[cluster.machines[f[0]].kind], f[0]))


class AlloxPlusArgs(AlphaArgs):
    """AlloX+ (§4.4, authors' simulator): (job, kind) pairs of the α-selected users, jobs waiting at least
    `timeout_s` first, then shortest estimate first; the first pair whose kind has an idle machine starts.
    `alpha`, `alpha_over`, `widen_alpha` as for AlloX (AlphaArgs)."""

    timeout_s: float = Field(500.0, ge=0.0)


@dataclass(frozen=True)
class AlloxPlus(AlphaRounds[AlloxPlusArgs]):
    """AlloX+: the O(m·n·log n) heuristic: time-outs first, then the shortest (job, kind) pair."""

    name: ClassVar[str] = "allox_plus"

    def pick(self, cluster: Cluster, users: set[str], alpha: float, now: float) -> list[Choice]:
        """The first (job, kind) pair in AlloX+ order whose kind has an idle machine; none if no pair has."""
        pairs = sorted(
            ((job, kind) for job in cluster.jobs if job.user in users for kind in job.estimates),
            key=lambda p: (
                now - p[0].group.submit_time < self.args.timeout_s,
                p[0].estimates[p[1]],
                p[0].group.submit_time,
                p[0].group.group_id,
                cluster.kinds.index(p[1]),
            ),
        )
        for job, kind in pairs:
            idle = cluster.idle(kind)
            if idle:
                tag = "timed out" if now - job.group.submit_time >= self.args.timeout_s else "shortest pair"
                return [(idle[0], job, kind, f"allox+: {tag}, {job.estimates[kind]:.0f}s", job.estimates[kind])]
        return []


register("allox", AlloxArgs)(Allox)
register("allox_plus", AlloxPlusArgs)(AlloxPlus)
