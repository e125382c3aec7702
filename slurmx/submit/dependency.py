"""`--dependency` at group level: a dependency on a group is satisfied by whichever of its variants ran.

A user writes sbatch's syntax with group ids where sbatch takes job ids (`afterok:train-3fa2c1`, what
`slurmx submit --parsable` printed); plain Slurm job ids pass through. At submission each group becomes the job ids
of its variants still in the queue, in the one form Slurm can wait on:

- `afterok:G` -> `afterok:v1?afterok:v2` (any of): the variants that lose are cancelled, which fails their own
  term but not the group's, because the one that runs completes its term;
- `afterany:G` -> `afterany:v1:v2` (all of): every variant ends, the losers by being cancelled.

An array group `G` (one Slurm array per kind, index i of each one group `G[i]`) becomes its kind arrays whole:
`afterany:G` -> `afterany:A1:A2` (every task ended); `afterok:G` only where one kind's array is left to run it
(else Slurm cannot say "each index ok on whichever kind ran it", and the fix is given); `afterok:G[i]` is one index,
as for any group (`afterok:A1_i?afterok:A2_i`).

A group that already ended is answered at once: `afterok` on a completed group and `afterany` on any ended group
need no wait (the term is dropped), `afterok` on a group that failed can never be satisfied and is refused. Slurm
cannot mix "all of" and "any of" in one dependency, so `afterok` on two groups that may each still run as either
variant is refused, with what to write instead. `after`, `afternotok`, `aftercorr`, `aftertime` and `singleton`
are refused: a cancelled losing variant would satisfy the first two, and the others name array tasks or job
names, which a group does not keep.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from slurmx.core.arrays import is_task_key, job_text, split_key
from slurmx.core.model import GroupState

if TYPE_CHECKING:
    from slurmx.submit.groups import GroupStatus

__all__ = ["DependencyTerm", "parse_dependency", "resolve_dependency"]

_TYPES = ("afterok", "afterany")
_REFUSED_TYPES = {
    "after": "a losing variant is cancelled, which satisfies `after` before the group's own variant starts",
    "afternotok": "a losing variant is cancelled, which counts as not ok while the group itself runs fine",
    "aftercorr": "it pairs the tasks of two arrays, and each index of a slurmx array runs on one of several "
                 "kinds' arrays; depend on the group (afterany:G) or one index (afterok:G[i])",
    "aftertime": "it is not a Slurm dependency type",
    "aftersingleton": "it is not a Slurm dependency type",
}
_JOB_ID = re.compile(r"[0-9]+")
_GROUP_ID = re.compile(r"[A-Za-z0-9_.-]{1,41}-[0-9a-f]{6}(\[[0-9]{1,7}\])?")


@dataclass(frozen=True, slots=True)
class DependencyTerm:
    kind: str  # afterok | afterany
    target: str  # a Slurm job id or a slurmx group id

    @property
    def is_group(self) -> bool:
        return not _JOB_ID.fullmatch(self.target)


def parse_dependency(text: str) -> tuple[tuple[DependencyTerm, ...], str]:
    """`afterok:G1:G2,afterany:123` -> (terms, "," or "?"); ValueError with the fix for anything else."""
    text = text.strip()
    if not text:
        raise ValueError("an empty dependency; write e.g. afterok:GROUP (the group id slurmx submit printed)")
    if "," in text and "?" in text:
        raise ValueError("Slurm cannot mix ',' (all of) and '?' (any of) in one dependency; use one of them")
    separator = "?" if "?" in text else ","
    terms: list[DependencyTerm] = []
    for part in text.split(separator):
        kind, colon, targets = part.strip().partition(":")
        if kind == "singleton":
            raise ValueError("singleton is not supported: it goes by job name, and each variant has its own; "
                             "chain the groups with afterok:GROUP instead")
        if kind in _REFUSED_TYPES:
            raise ValueError(f"{kind} is not supported on groups: {_REFUSED_TYPES[kind]}; use afterok or afterany")
        if kind not in _TYPES:
            raise ValueError(f"{part.strip()!r}: expected afterok:ID[:ID...] or afterany:ID[:ID...], where ID is a "
                             "group id (from slurmx submit --parsable) or a Slurm job id")
        if not colon or not targets:
            raise ValueError(f"{kind} needs at least one group or job id, e.g. {kind}:GROUP")
        for target in targets.split(":"):
            if "+" in target:
                raise ValueError(f"{kind}:{target}: a delay (+minutes) applies to `after` only, which groups do "
                                 "not support")
            if not (_JOB_ID.fullmatch(target) or _GROUP_ID.fullmatch(target)):
                raise ValueError(f"{kind}:{target}: not a group id (name-6 hex digits, as slurmx submit prints) "
                                 "or a Slurm job id")
            terms.append(DependencyTerm(kind, target))
    return tuple(terms), separator


Lookup = Callable[[str], "GroupStatus | None"]
IndexLookup = Callable[[str], "list[GroupStatus]"]


def resolve_dependency(text: str, find: Lookup, find_indices: IndexLookup | None = None) -> str:
    """The Slurm dependency for `text` with each group replaced by its variants' job ids ("" when every term is
    already satisfied); ValueError naming the group and the fix when Slurm could not express or never satisfy it.
    `find` looks a group (or one array index `G[i]`) up in squeue and accounting; `find_indices` the index groups
    of an array group `G`, when `find` knows no plain group of that id."""
    terms, separator = parse_dependency(text)
    parts: list[tuple[DependencyTerm, list[str]]] = []  # per unsatisfied term: the Slurm terms it becomes
    for term in terms:
        if not term.is_group:
            parts.append((term, [f"{term.kind}:{term.target}"]))
            continue
        group = find(term.target)
        indices = find_indices(term.target) if group is None and find_indices is not None else []
        if group is None and indices:
            slurm_terms = _array_terms(term, indices)
            if slurm_terms:
                parts.append((term, slurm_terms))
            continue
        if group is None:
            raise ValueError(f"{term.kind}:{term.target}: no group {term.target} in squeue or the last 7 days of "
                             "accounting; check the id with `slurmx status`")
        _check_usable(term, group)
        if group.finished:
            continue  # satisfied already: nothing to wait for
        live = [v.job_id for v in group.variants if not v.state.is_finished]
        parts.append((term, [f"{term.kind}:{job_text(job_id)}" for job_id in live]))
    return _combine(parts, separator)


def _check_usable(term: DependencyTerm, group: GroupStatus) -> None:
    if not group.valid:
        raise ValueError(f"{term.kind}:{term.target}: {group.note}; depend on a group you trust")
    if group.finished and term.kind == "afterok" and group.state is not GroupState.COMPLETED:
        raise ValueError(f"afterok:{term.target}: the group already ended {group.state.value}, so this "
                         "dependency can never be satisfied; resubmit that group first, or use afterany")


def _array_terms(term: DependencyTerm, indices: list[GroupStatus]) -> list[str]:
    """An array group's term: its kind arrays whole (`afterany:A1:A2`, all of, as for one job), [] when every
    index has ended (and, for afterok, completed). afterok while indices may still run on several kinds is
    refused: "every index ok on whichever kind ran it" is an and of ors that Slurm's dependencies cannot say."""
    for group in indices:
        _check_usable(term, group)
    if all(group.finished for group in indices):
        return []
    arrays = sorted({split_key(v.job_id)[0] if is_task_key(v.job_id) else v.job_id
                     for group in indices for v in group.variants})
    if term.kind == "afterok" and len(arrays) > 1:
        raise ValueError(f"afterok:{term.target}: every index of the array must complete on whichever kind runs "
                         "it, and a losing kind's task ends cancelled, which Slurm's afterok counts as failed; "
                         f"write afterany:{term.target} (every index ended) and check the results, or "
                         f"afterok:{term.target}[i] for one index")
    return [f"{term.kind}:{array_id}" for array_id in arrays]


def _combine(parts: list[tuple[DependencyTerm, list[str]]], separator: str) -> str:
    """One Slurm dependency: all "any of" or all "all of"."""
    if separator == "?":  # any of: a group's afterok is "any variant", which flattens; afterany would not
        for term, slurm_terms in parts:
            if term.kind == "afterany" and len(slurm_terms) > 1:
                raise ValueError(f"afterany:{term.target} inside '?' (any of): a losing variant ends by being "
                                 "cancelled and would satisfy it at once; use ',' (all of)")
        return "?".join(s for _, slurm_terms in parts for s in slurm_terms)
    any_of = [slurm_terms for term, slurm_terms in parts if term.kind == "afterok" and len(slurm_terms) > 1]
    if not any_of:
        return ",".join(s for _, slurm_terms in parts for s in slurm_terms)
    if len(parts) > 1:
        raise ValueError("afterok on a group that may still run as either variant waits for 'any of' its "
                         "variants, and Slurm cannot combine that with other terms ('all of'); depend on that "
                         "one group, or write afterany:G1:G2 (all ended) and check their results")
    return "?".join(any_of[0])
