"""FitGpp's preemptive baselines (digest §2.2): LRTP and RAND. The third, non-preemptive FIFO, is `fifo`
(`baselines.Fifo` with `backfill: false`: one queue, TE and BE in arrival order, strict head-of-line).

Both run on the same round as FitGpp (TE jobs ahead of queued BE jobs, strict FIFO for BE, victims back at the
head of the queue, freed room earmarked for the TE job) and differ only in whom they preempt: they ignore node fit
and grace periods and keep preempting until the TE job fits — which is why they preempt about 15 times as many jobs
as FitGpp in the paper (Table 3). The cap P applies to them too (Table 3 is "when P = 1" for all three).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar, Literal

import numpy as np

from slurmx.core.actions import Note, Plan
from slurmx.core.model import ClusterView, Group
from slurmx.policies.base import Capabilities, register
from slurmx.policies.fitgpp import FloatArray, IntArray, PreemptiveArgs, Round, Victims, random_order, run_round

__all__ = ["Lrtp", "LrtpArgs", "Rand", "RandArgs", "remaining_rows"]

Scope = Literal["cluster", "node"]


def remaining_rows(rnd: Round, rows: IntArray, estimate_from: Literal["start", "now"]) -> FloatArray:
    """The oracle's remaining run time of each row: in simulation `estimate_s` is the truth (the paper's LRTP
    "can perfectly predict the execution time"). `start`: the estimate counts from the variant's latest start
    (remaining = estimate - elapsed; what the simulator reports); `now`: it already is the remaining time.
    NaN where the view has no estimate."""
    estimate = rnd.estimate[rows]
    if estimate_from == "now":
        return np.maximum(estimate, 0.0)
    start = rnd.start_time[rows]
    elapsed = np.where(np.isfinite(start), rnd.now - start, 0.0)
    return np.maximum(estimate - elapsed, 0.0)


def _by_scope(rnd: Round, te: Group, ordered: list[int], scope: Scope) -> Victims | None:
    """`cluster`: victims anywhere, in order, until the TE job fits on one node (the digest's reading).
    `node`: only victims on one node — the first node, in victim order, on which enough of them make room."""
    if scope == "cluster":
        return rnd.until_fits(te, ordered)
    seen: set[int] = set()
    for row in ordered:
        node = int(rnd.node[row])
        if node not in seen:
            seen.add(node)
            victims = rnd.until_fits(te, [r for r in ordered if rnd.node[r] == node])
            if victims is not None:
                return victims
    return None


def _eligible(rnd: Round, te: Group) -> IntArray:
    """Rows of running BE jobs under the cap, not in grace, on a node the TE job has a variant for."""
    _, has = rnd.requests_by_node(te)
    return np.flatnonzero(rnd.eligible() & has[rnd.node])


class LrtpArgs(PreemptiveArgs):
    """`scope`: where victims may be (digest §2.2). `estimate_from`: whether a variant's `estimate_s` counts from
    its (latest) start — remaining = estimate - elapsed — or is already the remaining time."""

    scope: Scope = "cluster"
    estimate_from: Literal["start", "now"] = "start"


@dataclass(frozen=True)
class Lrtp:
    """Longest Remaining Time Preemption (Big-C's victim rule) with oracle remaining times."""

    args: LrtpArgs = field(default_factory=LrtpArgs)
    name: ClassVar[str] = "lrtp"
    capabilities: ClassVar[Capabilities] = Capabilities(te_preempts_be=True)  # FitGpp's round, its own victims

    def schedule(self, view: ClusterView, now: float) -> Plan:
        return run_round(view, now, self.args, self.select, "lrtp")

    def select(self, te: Group, rnd: Round) -> tuple[Victims, list[Note]]:
        """Longest remaining first (jobs without an estimate last), until the TE job fits."""
        rows = _eligible(rnd, te)
        left = remaining_rows(rnd, rows, self.args.estimate_from)
        longest = np.where(np.isnan(left), np.inf, -left)
        ordered = [int(r) for r in rows[np.lexsort((rows, rnd.tie_keys()[rows], longest))]]
        victims = _by_scope(rnd, te, ordered, self.args.scope)
        if victims is None:
            return [], []
        remaining = dict(zip((int(r) for r in rows), left.tolist(), strict=True))
        return [(r, b, f"remaining {_seconds(remaining[r])}; {why}") for r, b, why in victims], []


def _seconds(value: float) -> str:
    return "unknown" if math.isnan(value) else f"{value:.0f}s"


class RandArgs(PreemptiveArgs):
    """`seed`: the random order is a hash of (seed, time, TE job, candidate) — no hidden RNG state; the paper
    averages 4 repetitions (seeds). `scope` as for LRTP."""

    seed: int = 0
    scope: Scope = "cluster"


@dataclass(frozen=True)
class Rand:
    """Preempt randomly chosen running BE jobs until the TE job fits; deterministic for a seed."""

    args: RandArgs = field(default_factory=RandArgs)
    name: ClassVar[str] = "rand"
    capabilities: ClassVar[Capabilities] = Capabilities(te_preempts_be=True)  # FitGpp's round, its own victims

    def schedule(self, view: ClusterView, now: float) -> Plan:
        return run_round(view, now, self.args, self.select, "rand")

    def select(self, te: Group, rnd: Round) -> tuple[Victims, list[Note]]:
        shuffled = random_order(self.args.seed, rnd.now, te.group_id, _eligible(rnd, te))
        ordered = [int(r) for r in shuffled]
        victims = _by_scope(rnd, te, ordered, self.args.scope)
        return (victims or []), []


register("lrtp", LrtpArgs)(Lrtp)
register("rand", RandArgs)(Rand)
