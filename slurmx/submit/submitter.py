"""Submit a group: render every variant first, then submit them all or none.

Rendering happens before the first `sbatch`, so a spec error submits nothing; if Slurm refuses variant k,
the variants already submitted are cancelled, so a failed submission never leaves a held job behind.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass, replace

from slurmx.core.config import SiteConfig
from slurmx.core.spool import group_spool
from slurmx.core.validation import ConfigError
from slurmx.core.wake import notify
from slurmx.slurm import SlurmAdapter, SlurmError
from slurmx.slurm.adapter import FolderTaken, SpoolRootUnsafe
from slurmx.submit.array import array_environment, array_text
from slurmx.submit.dependency import resolve_dependency
from slurmx.submit.groups import find_group, find_groups
from slurmx.submit.placement import fit_kinds, needs_cluster
from slurmx.submit.render import RenderedVariant, render_with_sample
from slurmx.submit.samples import plan_samples, queue_samples
from slurmx.submit.spec import JobSpec, resolve_variants

__all__ = ["SubmitError", "SubmittedGroup", "array_specs", "as_slurm_arrays", "fit_to_cluster", "new_group_id",
           "plan_group", "submit_group", "submit_groups"]

MODES = ("managed", "race", "pick")


class SubmitError(Exception):
    """Slurm refused a variant; the message says which, why, and that nothing was left behind."""


@dataclass(frozen=True, slots=True)
class SubmittedGroup:
    group_id: str
    name: str
    mode: str
    variants: tuple[tuple[str, int], ...]  # (kind, Slurm job id), in the site's order
    spool_dir: str
    samples: tuple[int, ...] = ()  # profiling samples queued held for slurmxd (managed mode)
    note: str = ""  # one line on something that did not go as planned without failing the submission
    indices: tuple[int, ...] = ()  # a group of Slurm arrays (one per kind): its indices, each a group `g[i]`

    def job_ids(self) -> list[int]:
        return [job_id for _, job_id in self.variants]


def new_group_id(name: str) -> str:
    """`<name>-<6 hex>`: readable in squeue, unique enough per user, safe inside a comment tag."""
    return f"{name[:40]}-{secrets.token_hex(3)}"


def plan_group(spec: JobSpec, site: SiteConfig, *, mode: str | None = None, pick: str | None = None,
               only: tuple[str, ...] | None = None, group_id: str | None = None,
               source: str = "<spec>", array: bool = False) -> tuple[str, str, list[RenderedVariant]]:
    """(group id, mode, rendered variants) — everything short of talking to Slurm (what --dry-run prints).
    `array`: each variant's script is a kind's Slurm job array (`as_slurm_arrays`)."""
    mode = mode or site.submit.mode
    if mode not in MODES:
        raise ConfigError([f"{source}: mode must be one of {', '.join(MODES)}, got {mode!r}"])
    kinds = resolve_variants(spec, site, only, source)
    if pick is not None or mode == "pick":
        if pick is None:
            raise ConfigError([f"{source}: mode 'pick' needs --pick VARIANT (one of {', '.join(kinds)})"])
        if pick not in kinds:
            raise ConfigError([f"{source}: --pick {pick}: not a variant of this job; choose one of "
                               f"{', '.join(kinds)}"])
        mode, kinds = "pick", (pick,)
    gid = group_id or new_group_id(spec.name)
    rendered = [render_with_sample(spec, site, kind, gid, mode, source, array=array) for kind in kinds]
    return gid, mode, rendered


def as_slurm_arrays(spec: JobSpec, site: SiteConfig, mode: str | None = None, pick: str | None = None) -> bool:
    """`--array` goes to Slurm as one job array per kind (submit/array.py): any mode but a managed spec with
    profiling samples, which are queued per group."""
    if spec.array is None:
        return False
    mode = "pick" if pick is not None else mode or site.submit.mode
    return not (mode == "managed" and spec.work is not None and round(spec.work) >= 1)


def array_specs(spec: JobSpec) -> list[JobSpec]:
    """One spec per `--array` index (`NAME_INDEX`, with the index in Slurm's array variables); [spec] without."""
    if spec.array is None:
        return [spec]
    return [spec.model_copy(update={"array": None, "name": f"{spec.name}_{index}",
                                    "env": {**spec.env, **array_environment(spec.array, index)}})
            for index in spec.array]


def with_resolved_dependency(spec: JobSpec, site: SiteConfig, adapter: SlurmAdapter, source: str = "<spec>") \
        -> JobSpec:
    """The spec with its group-level dependency in Slurm's terms: the job ids of the named groups' variants."""
    if spec.dependency is None:
        return spec
    try:
        resolved = resolve_dependency(
            spec.dependency, lambda group_id: find_group(adapter, group_id, spool_dir=site.submit.spool_dir),
            lambda group_id: find_groups(adapter, group_id, spool_dir=site.submit.spool_dir))
    except ValueError as exc:
        raise ConfigError([f"{source}: dependency: {exc}"]) from None
    return spec.model_copy(update={"dependency": resolved or None})


def fit_to_cluster(spec: JobSpec, site: SiteConfig, adapter: SlurmAdapter, *,
                   only: tuple[str, ...] | None = None, source: str = "<spec>",
                   strict: bool = True) -> tuple[tuple[str, ...] | None, list[str]]:
    """(the kinds to submit, a note per kind left out): the kinds whose nodes can satisfy the spec's placement and
    node count (submit/placement.py), from one read of the nodes, made only when the spec asks for placement.

    Slurm unreachable: a SubmitError in one line (`strict`), else a note and the kinds unfitted (`--dry-run`).
    """
    kinds = resolve_variants(spec, site, only, source)
    if not needs_cluster(spec, kinds):
        return only, []
    try:
        nodes = adapter.nodes()
    except SlurmError as exc:
        said = " ".join(str(exc).split())[:300]
        if not strict:
            return only, [f"Slurm unreachable ({said}): the placement was not checked against the nodes; each "
                          "variant is shown with it"]
        raise SubmitError(f"cannot read the cluster's nodes to place this job (its constraint, node list or node "
                          f"count): {said}; nothing was submitted; retry when Slurm answers (sinfo)") from None
    kept, notes = fit_kinds(spec, site, kinds, nodes, source)
    return kept, notes


def submit_groups(spec: JobSpec, site: SiteConfig, adapter: SlurmAdapter, *, mode: str | None = None,
                  pick: str | None = None, only: tuple[str, ...] | None = None,
                  source: str = "<spec>", fitted: bool = False, slurm_arrays: bool = True,
                  files: Mapping[str, str] | None = None) -> list[SubmittedGroup]:
    """The spec's group, its `--array` as one Slurm array per kind (one group), or one group per index: all of
    them or none (a refusal cancels the ones already submitted). `fitted`: `only` already holds the kinds
    `fit_to_cluster` kept (the caller showed its notes); else it is fitted here and its notes lead each group's
    `note`. `slurm_arrays` False: one group per index always (a caller that waits on each group by id). `files`
    go into every group's folder before its first sbatch (`submit_group`)."""
    notes: list[str] = []
    if not fitted:
        only, notes = fit_to_cluster(spec, site, adapter, only=only, source=source)
    resolved = with_resolved_dependency(spec, site, adapter, source)
    if resolved.array is not None and slurm_arrays and as_slurm_arrays(resolved, site, mode, pick):
        return [_with_notes(_submit_resolved(resolved, site, adapter, mode=mode, pick=pick, only=only,
                                             source=source, files=files), notes)]
    if resolved.array_throttle:
        raise ConfigError([f"{source}: array: a throttle (%{resolved.array_throttle}) needs one Slurm array per "
                           "kind, which a managed job with profiling samples (work in steps) cannot be; leave %N "
                           "out (each index is then a group of its own, queued by policy)"])
    submitted: list[SubmittedGroup] = []
    for one in array_specs(resolved):
        try:
            group = _submit_resolved(one, site, adapter, mode=mode, pick=pick, only=only, source=source,
                                     files=files)
        except SubmitError as exc:
            earlier = [(str(g.group_id), job_id) for g in submitted for job_id in (*g.job_ids(), *g.samples)]
            raise SubmitError(f"{exc}{_roll_back(adapter, earlier)}" if earlier else str(exc)) from None
        submitted.append(_with_notes(group, notes))
    return submitted


def submit_group(spec: JobSpec, site: SiteConfig, adapter: SlurmAdapter, *, mode: str | None = None,
                 pick: str | None = None, only: tuple[str, ...] | None = None,
                 source: str = "<spec>", files: Mapping[str, str] | None = None) -> SubmittedGroup:
    """Submit every variant or none; `files` (name -> text) are written into the group folder before the first
    sbatch, as the submitting user, so a job finds them whichever variant starts first."""
    if spec.array is not None:
        raise ConfigError([f"{source}: array: one group per index: submit it with submit_groups"])
    only, notes = fit_to_cluster(spec, site, adapter, only=only, source=source)
    return _with_notes(_submit_resolved(with_resolved_dependency(spec, site, adapter, source), site, adapter,
                                        mode=mode, pick=pick, only=only, source=source, files=files), notes)


def _with_notes(group: SubmittedGroup, notes: list[str]) -> SubmittedGroup:
    """The group with `notes` (kinds left out by placement) before its own note, in its one line."""
    if not notes:
        return group
    return replace(group, note="; ".join([*notes, group.note] if group.note else notes))


def _submit_resolved(spec: JobSpec, site: SiteConfig, adapter: SlurmAdapter, *, mode: str | None,
                     pick: str | None, only: tuple[str, ...] | None, source: str,
                     files: Mapping[str, str] | None = None) -> SubmittedGroup:
    """`submit_group` of a spec whose dependency is already in Slurm's terms (resolved once per array)."""
    gid, mode, rendered = _plan_with_folder(spec, site, adapter, mode=mode, pick=pick, only=only, source=source,
                                            files=files or {})
    # A spec that still has its array here is submitted as one Slurm job array per kind (`as_slurm_arrays`).
    extra = [f"--array={array_text(spec.array, spec.array_throttle)}"] if spec.array is not None else []
    # Samples first: when slurmxd first sees the group's variants, the samples it may release are already queued.
    samples = queue_samples(adapter, plan_samples(spec, site, gid, rendered) if mode == "managed" else [])
    submitted: list[tuple[str, int]] = [("sample", job_id) for job_id in samples.job_ids]
    for variant in rendered:
        try:
            submitted.append((variant.kind, adapter.submit(variant.script, extra)))
        except (SlurmError, UnicodeError) as exc:
            raise SubmitError(f"variant {variant.kind} of {spec.name}: {exc}{_roll_back(adapter, submitted)}") from None
    if mode == "managed":  # the variants wait for slurmxd: wake it rather than wait for its next tick
        notify(site.daemon.socket)
    variants = tuple(pair for pair in submitted if pair[0] != "sample")
    return SubmittedGroup(gid, spec.name, mode, variants, group_spool(site, gid), samples.job_ids, samples.note,
                          spec.array or ())


FOLDER_TRIES = 3  # a taken group folder means a new group id; three taken in a row is someone planting them


def _plan_with_folder(spec: JobSpec, site: SiteConfig, adapter: SlurmAdapter, *, mode: str | None,
                      pick: str | None, only: tuple[str, ...] | None, source: str,
                      files: Mapping[str, str]) -> tuple[str, str, list[RenderedVariant]]:
    """Plan the group and create its folder owner-only, as the submitting user, before any sbatch.

    The folder holds everything the group's jobs trust (hooks, payloads, checkpoints, outputs),
    and the spool root is writable by every user: a folder that already exists may be another user's plant, so
    it is never adopted; the group takes a new id instead. A spool root that is not root's and sticky (or is a
    link) is refused before any folder is made: its owner, or any user without the sticky bit, could swap ours.
    """
    for _ in range(FOLDER_TRIES):
        gid, planned_mode, rendered = plan_group(spec, site, mode=mode, pick=pick, only=only, source=source,
                                                 array=spec.array is not None)
        folder = group_spool(site, gid)
        try:
            adapter.make_private_folder(folder, files)
        except FolderTaken:
            continue
        except SpoolRootUnsafe as exc:  # checked where the folder is made: another user could swap it
            raise SubmitError(f"{exc.message}; nothing was submitted") from None
        except SlurmError as exc:
            raise SubmitError(f"cannot create the group folder {folder} as the submitting user: {exc}; "
                              f"submit.spool_dir ({site.submit.spool_dir}) must exist on the cluster's shared "
                              "storage, writable by users and sticky (mode 1777)") from None
        return gid, planned_mode, rendered
    raise SubmitError(f"{FOLDER_TRIES} group folders in {site.submit.spool_dir} already existed under fresh random "
                      "names: someone may be planting folders there; nothing was submitted; tell the site admin")


def _roll_back(adapter: SlurmAdapter, submitted: list[tuple[str, int]]) -> str:
    """Cancel what was submitted; the returned text says what happened, including a failed cancel."""
    if not submitted:
        return ""
    ids = [job_id for _, job_id in submitted]
    shown = ", ".join(map(str, ids))
    try:
        adapter.cancel(ids)
    except SlurmError as exc:
        return f"; could NOT cancel the variant(s) already submitted (jobs {shown}): {exc}; run scancel {shown}"
    return f"; cancelled the {len(ids)} variant(s) already submitted (jobs {shown})"
