"""Run one trace through both backends of the cycle and return their decision logs.

The simulator runs the trace as it always does. slurmxd then runs against the model slurmctld (`model_slurm`), its
clock set to each instant the simulator decided at, the trace's jobs submitted held as `slurmx submit` leaves
managed variants: the same arrivals, the same completions, the same decision instants. Requeued jobs start over
(`checkpoint: lose`): slurmxd cannot know how far a job got before its grace signal, so only then do both sides
show the same remaining estimate.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slurmx.core import tag
from slurmx.core.config import SiteConfig, parse_site_config
from slurmx.core.model import JobClass
from slurmx.core.placement import ANYWHERE, Placement
from slurmx.core.resources import Resources
from slurmx.cycle import DecisionLog, DecisionRecord
from slurmx.daemon.loop import Daemon
from slurmx.daemon.store import Store
from slurmx.policies import make_policy
from slurmx.policies.base import Policy
from slurmx.sim.cluster import ModelCluster, NodeShape, PartitionShape
from slurmx.sim.config import EngineOptions
from slurmx.sim.engine import Engine
from slurmx.sim.jobs import SimJob, SimVariant
from slurmx.slurm import CliSlurm
from tests.parity.model_slurm import ModelNode, ModelSlurm
from tests.spool import make_folder

NODE_SHAPES: dict[str, Resources] = {
    "cpu": Resources(4, 8000),
    "gpu": Resources(4, 8000, {"gpu": 2}),
    "accel": Resources(4, 8000, {"accel": 1}),
}
GRES = {"gpu": "gpu:1", "accel": "accel:1"}
GRACE_S = 30
EPOCH = 1_790_000_000  # trace time 0: Slurm's times are epoch seconds, and 0 means "not set"


@dataclass(frozen=True)
class Runs:
    sim: DecisionLog
    slurm: DecisionLog
    model: ModelSlurm


def model_cluster(kinds: Sequence[str], per_kind: int = 2, features: Sequence[tuple[str, ...]] = ()) -> ModelCluster:
    """`per_kind` nodes per kind; with `features`, node i of each kind has `features[i]` (one node per shape)."""
    if not features:
        return ModelCluster([PartitionShape(k, k, (NodeShape(per_kind, NODE_SHAPES[k], k[0]),)) for k in kinds])
    return ModelCluster([PartitionShape(k, k, tuple(NodeShape(1, NODE_SHAPES[k], f"{k[0]}{i}-", f)
                                                    for i, f in enumerate(features))) for k in kinds])


def site_config(kinds: Sequence[str], policy: str, params: Mapping[str, Any], state: Path) -> SiteConfig:
    return parse_site_config({
        "cluster": {"name": "parity"},
        "resources": {k: {"partition": k, "cpus": 1, "mem": "500M", **({"gres": GRES[k]} if k in GRES else {})}
                      for k in kinds},
        "policy": {"name": policy, "params": dict(params)},
        "preemption": {"grace": GRACE_S},
        "daemon": {"state_dir": str(state), "start_timeout": 86_400},
        "submit": {"spool_dir": str(state / "spool")},
        "profile": {"enabled": False},
    })


def job(job_id: str, submit: int, durations: Mapping[str, int], cpus: int = 1, mem_mb: int = 500,
        job_class: JobClass = JobClass.BE, nodes: int = 1, placement: Placement = ANYWHERE) -> SimJob:
    """A group submitted `submit` s after `EPOCH`, one variant per kind in `durations` (in the site's kind
    order), each on `nodes` nodes where `placement` admits; estimates exact."""
    variants = {k: SimVariant(k, Resources(cpus, mem_mb, {GRES[k].split(":")[0]: 1} if k in GRES else {}), d, d,
                              nodes, placement)
                for k, d in durations.items()}
    return SimJob(job_id, "alice", float(EPOCH + submit), variants, job_class=job_class, grace_s=GRACE_S)


def run_both(policy: str, jobs: Sequence[SimJob], kinds: Sequence[str], state: Path,
             params: Mapping[str, Any] | None = None, options: EngineOptions | None = None,
             cluster: ModelCluster | None = None, make: Callable[[], Policy] | None = None) -> Runs:
    """`make`: a policy of the test's own for each backend (the site config then names `policy`)."""
    params = dict(params or {})
    make = make or (lambda: make_policy(policy, params))
    options = options or EngineOptions(checkpoint="lose")
    sim_log = DecisionLog(digest_views=True, keep_views=True)
    cluster = cluster or model_cluster(kinds)
    Engine(cluster, make(), jobs, options, decisions=sim_log).run()
    model = ModelSlurm([ModelNode(n.name, n.partition, cluster.resources(n.capacity), n.features)
                        for n in cluster.nodes], keep=options.checkpoint == "keep")
    site = site_config(kinds, policy, params, state)
    now = [0.0]
    slurm_log = DecisionLog(digest_views=True, keep_views=True)
    daemon = Daemon(site, CliSlurm(model), Store(state / "slurmxd.sqlite"), make(),
                    clock=lambda: now[0], decisions=slurm_log)
    waiting = sorted(jobs, key=lambda j: j.submit_time)
    for t, _, _ in sim_log.decisions:
        while waiting and waiting[0].submit_time <= t:
            _submit(model, site, waiting.pop(0))
        model.advance(t)
        now[0] = t
        daemon.cycle()
    return Runs(sim_log, slurm_log, model)


def _submit(model: ModelSlurm, site: SiteConfig, sim_job: SimJob) -> None:
    """What `slurmx submit` does: the group folder as the submitting user, then one sbatch per variant."""
    spool = Path(site.submit.spool_dir)
    if not spool.exists():
        spool.mkdir(mode=0o1777)
        spool.chmod(0o1777)
    make_folder(spool, sim_job.job_id, model.uid)
    for kind, variant in sim_job.variants.items():
        comment = tag.encode(tag.GroupTag(sim_job.job_id, kind, sim_job.job_class.value, grace_s=sim_job.grace_s,
                                          estimate_s=variant.estimate_s))
        model.add(f"{sim_job.job_id}@{kind}", kind, site.qos_for(sim_job.job_class), comment, variant.request,
                  variant.duration_s, int(sim_job.submit_time), variant.nodes, variant.placement)


def differences(runs: Runs) -> list[str]:
    """Where the two logs part, in words (empty: the same decisions on the same views, action by action)."""
    found: list[str] = []
    sim_views, slurm_views = runs.sim.decisions, runs.slurm.decisions
    for (t, n, a), (_, _, b) in zip(sim_views, slurm_views, strict=False):
        if a != b:
            found.append(f"decision {n} at t={t:g}: the views differ:\n{_diff(runs.sim.views[a], runs.slurm.views[b])}")
            break
    if len(sim_views) != len(slurm_views):
        found.append(f"{len(sim_views)} simulator decisions, {len(slurm_views)} on slurm")
    sim, slurm = runs.sim.records, runs.slurm.records
    for i, (x, y) in enumerate(zip(sim, slurm, strict=False)):
        if x.key() != y.key():
            found.append(f"action {i}: simulator {_show(x)} / slurm {_show(y)}")
            break
    if len(sim) != len(slurm):
        found.append(f"{len(sim)} simulator actions, {len(slurm)} on slurm; first extra: "
                     f"{_show((sim if len(sim) > len(slurm) else slurm)[min(len(sim), len(slurm))])}")
    return found


def _show(r: DecisionRecord) -> str:
    return f"t={r.t:g} {r.action} {r.group_id} -> {r.outcome.status} {r.outcome.detail}".strip()


def _diff(sim: str, slurm: str) -> str:
    import difflib
    lines = difflib.unified_diff(_pretty(sim), _pretty(slurm), "simulator", "slurm", n=2, lineterm="")
    return "\n".join(list(lines)[:60])


def _pretty(text: str) -> list[str]:
    import json
    return json.dumps(json.loads(text), indent=1, sort_keys=True).splitlines()
