"""A scripted transport for parity tests: a small model of slurmctld answering in Slurm 24.11's own output.

This is a fake, named as one: the parity tests need a Slurm whose clock they drive, which the real cluster cannot
offer (the integration tests run the real one). Every answer is a record recorded from real Slurm 24.11
(`tests/fixtures/slurm/24.11`) with the fields the model owns filled in, so the daemon reads it through the very
parser, adapter and transport seam it uses on a cluster.

The model is slurmctld with zero latency: a released job that fits starts at once (on its ReqNodeList, else the
first nodes of its partition with room, in node order, as many as it asks, each one its features, excluded nodes
and `--exclusive` admit; an exclusive job holds its nodes whole); a running job completes `duration` after it
started; a
signalled job stops making progress (it checkpointed and waits, `on_signal: wait`) until the daemon requeues it;
`requeuehold` brings it back held with its remaining work, all of it if `keep` is False.
"""

from __future__ import annotations

import copy
import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slurmx.core.placement import Placement
from slurmx.core.resources import Resources
from slurmx.slurm.transport import CommandResult

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "slurm" / "24.11"
_JOB = json.loads((RECORDED / "squeue.json").read_text())
_NODES = json.loads((RECORDED / "nodes.json").read_text())
_PARTITION_LINE = (RECORDED / "partitions.txt").read_text().splitlines()[0]


def _number(value: int) -> dict[str, Any]:
    return {"set": True, "infinite": False, "number": value}


@dataclass
class ModelNode:
    name: str
    partition: str
    capacity: Resources
    features: tuple[str, ...] = ()


@dataclass
class ModelJob:
    job_id: int
    name: str
    partition: str
    qos: str
    comment: str
    request: Resources
    duration: float  # seconds of work left at the next start
    submit: int
    held: bool = True
    state: str = "PENDING"
    nodes: str = ""
    required: str = ""
    start: float | None = None
    end: float | None = None
    restarts: int = 0
    priority: int = 0
    signalled_at: float | None = None
    features: str = ""  # the job's --constraint
    excluded: str = ""
    exclusive: bool = False
    node_count: int = 1  # `request` on each (sbatch -N with per-node sizes)

    def tres(self) -> str:
        """The job's totals over its nodes, as 24.11 writes them (`cpu=2,mem=1000M,node=2` for two 1-CPU nodes)."""
        n = self.node_count
        gres = "".join(f",gres/{k}={v * n}" for k, v in sorted(self.request.gres.items()))
        cpus = self.request.cpus * n
        return f"cpu={cpus},mem={self.request.mem_mb * n}M,node={n},billing={cpus}{gres}"

    def placement(self) -> Placement:
        return Placement(self.features, tuple(n for n in self.required.split(",") if n),
                         tuple(n for n in self.excluded.split(",") if n), self.exclusive)


@dataclass
class ModelSlurm:
    """The transport (`run`) and the world behind it; `advance(t)` moves its clock."""

    nodes: list[ModelNode]
    keep: bool = False  # a requeued job keeps the work it did (checkpoint: keep) or starts over (lose)
    user: str = "alice"
    uid: int = 2001
    now: float = 0.0
    jobs: dict[int, ModelJob] = field(default_factory=dict)
    calls: list[tuple[str, ...]] = field(default_factory=list)
    _next_id: int = 1000

    def describe(self) -> str:
        return "model slurmctld (parity tests)"

    # ---- the world --------------------------------------------------------------------------------------

    def add(self, name: str, partition: str, qos: str, comment: str, request: Resources, duration: float,
            submit: int, node_count: int = 1, placement: Placement | None = None) -> int:
        """A held job, as `slurmx submit` leaves a managed variant (with its -N, -C, -w, -x, --exclusive)."""
        self._next_id += 1
        job = ModelJob(self._next_id, name, partition, qos, comment, request, duration, submit, node_count=node_count)
        if placement is not None:
            job.features, job.exclusive = placement.constraint, placement.exclusive
            job.required, job.excluded = ",".join(placement.required), ",".join(placement.excluded)
        self.jobs[self._next_id] = job
        return self._next_id

    def advance(self, t: float) -> None:
        """Complete the jobs whose work ends by `t` (at the instant it ends), then schedule."""
        for job in sorted(self.jobs.values(), key=lambda j: j.job_id):
            if job.state == "RUNNING" and job.signalled_at is None and job.start is not None \
                    and job.start + job.duration <= t:
                job.state, job.end = "COMPLETED", job.start + job.duration
        self.now = t
        self._schedule()

    def _used(self, node: ModelNode) -> Resources:
        used = Resources()
        for job in self.jobs.values():
            if job.state == "RUNNING" and node.name in job.nodes.split(","):
                used = used + (node.capacity if job.exclusive else job.request)
        return used

    def _fits(self, node: ModelNode, job: ModelJob, placement: Placement) -> bool:
        used = self._used(node)
        if not placement.admits(node.name, node.features, not used.cpus and not used.mem_mb):
            return False
        return (node.capacity if job.exclusive else job.request).fits_in(node.capacity - used)

    def _schedule(self) -> None:
        for job in sorted(self.jobs.values(), key=lambda j: j.job_id):
            if job.state != "PENDING" or job.held:
                continue
            placement = job.placement()
            found = [n.name for n in self.nodes if n.partition == job.partition and self._fits(n, job, placement)]
            if len(found) >= job.node_count:
                job.state, job.nodes, job.start, job.end = "RUNNING", ",".join(found[:job.node_count]), self.now, None

    # ---- the transport ----------------------------------------------------------------------------------

    def run(self, argv: Sequence[str], stdin: str | None = None, timeout: float = 30.0) -> CommandResult:
        self.calls.append(tuple(argv))
        args = list(argv)
        out = ""
        if args == ["scontrol", "--version"]:
            out = "slurm 24.11.5\n"
        elif args[:2] == ["squeue", "--json"]:
            out = self._squeue()
        elif args == ["scontrol", "show", "nodes", "--json"]:
            out = self._node_json()
        elif args == ["scontrol", "show", "partition", "-o"]:
            out = self._partitions()
        elif args == ["scontrol"] and stdin is not None:  # commands on stdin, one per line, as scontrol reads them
            for line in stdin.splitlines():
                words = line.split()
                if words[:1] != ["update"]:
                    return CommandResult(tuple(args), 1, "", f"model slurmctld: no model of {line}")
                self._update(words[1:])
            self._schedule()
        elif args[:1] == ["scontrol"] and args[1] in ("hold", "release", "requeue", "requeuehold"):
            for job_id in map(int, args[2].split(",")):
                self._control(args[1], self.jobs[job_id])
            self._schedule()
        elif args[:2] == ["scontrol", "update"]:
            self._update(args[2:])
            self._schedule()
        elif args[:1] == ["scancel"]:
            self._cancel(args[1:])
            self._schedule()
        elif args == ["scontrol", "ping"]:
            out = "Slurmctld(primary) at model is UP\n"
        else:
            return CommandResult(tuple(args), 1, "", f"model slurmctld: no model of {shlex.join(args)}")
        return CommandResult(tuple(args), 0, out, "")

    def _control(self, verb: str, job: ModelJob) -> None:
        if verb == "hold" and job.state == "PENDING":
            job.held = True
        elif verb == "release":
            job.held = False
        elif verb in ("requeue", "requeuehold") and job.state == "RUNNING":
            assert job.start is not None
            if self.keep:
                stopped = job.signalled_at if job.signalled_at is not None else self.now
                job.duration -= stopped - job.start
            job.state, job.nodes, job.start, job.signalled_at = "PENDING", "", None, None
            job.restarts += 1
            job.held = verb == "requeuehold"

    def _update(self, words: list[str]) -> None:
        fields = dict(w.split("=", 1) for w in words)
        for job_id in map(int, fields.pop("JobId").split(",")):
            job = self.jobs[job_id]
            if "ReqNodeList" in fields:
                job.required = fields["ReqNodeList"]
            if "Priority" in fields:
                job.priority = int(fields["Priority"])
            if "NumCPUs" in fields or "MinMemoryNode" in fields:
                cpus = int(fields.get("NumCPUs", job.request.cpus))
                mem = int(fields.get("MinMemoryNode", str(job.request.mem_mb)).rstrip("M"))
                job.request = Resources(cpus, mem, job.request.gres)

    def _cancel(self, args: list[str]) -> None:
        signal = next((a for a in args if a.startswith("--signal=")), None)
        ids = [int(a) for a in args if not a.startswith("-")]
        for job_id in ids:
            job = self.jobs[job_id]
            if signal is not None:
                if job.state == "RUNNING" and job.signalled_at is None:
                    job.signalled_at = self.now
            elif job.state in ("PENDING", "RUNNING"):
                job.state, job.end = "CANCELLED", self.now

    # ---- answers, in 24.11's recorded shapes --------------------------------------------------------------

    def _squeue(self) -> str:
        template = _JOB["jobs"][0]
        jobs = []
        for job in sorted(self.jobs.values(), key=lambda j: j.job_id):
            record = copy.deepcopy(template)
            record.update({
                "job_id": job.job_id, "name": job.name, "user_name": self.user, "user_id": self.uid,
                "job_state": [job.state], "hold": job.held and job.state == "PENDING",
                "state_reason": "JobHeldUser" if job.held and job.state == "PENDING" else "None",
                "priority": _number(0 if job.held else job.priority or 1), "partition": job.partition,
                "qos": job.qos, "comment": job.comment, "nodes": job.nodes, "required_nodes": job.required,
                "tres_req_str": job.tres(), "tres_alloc_str": job.tres() if job.state == "RUNNING" else "",
                "restart_cnt": job.restarts, "time_limit": {"set": False, "infinite": True, "number": 0},
                "features": job.features, "excluded_nodes": job.excluded, "node_count": _number(job.node_count),
                "shared": ["none"] if job.exclusive else [],
                "submit_time": _number(job.submit), "start_time": _number(int(job.start or 0)),
                "end_time": _number(int(job.end or 0)),
            })
            jobs.append(record)
        return json.dumps({**_JOB, "jobs": jobs})

    def _node_json(self) -> str:
        template = _NODES["nodes"][0]
        nodes = []
        for node in self.nodes:
            used = self._used(node)
            record = copy.deepcopy(template)
            gres = ",".join(f"{k}:{v}" for k, v in sorted(node.capacity.gres.items()))
            gres_used = ",".join(f"{k}:{used.gres.get(k, 0)}" for k in sorted(node.capacity.gres))
            record.update({"name": node.name, "partitions": [node.partition], "cpus": node.capacity.cpus,
                           "real_memory": node.capacity.mem_mb, "gres": gres, "gres_used": gres_used,
                           "alloc_cpus": used.cpus, "alloc_memory": used.mem_mb,
                           "state": ["MIXED" if used.cpus else "IDLE"], "features": list(node.features),
                           "active_features": list(node.features)})
            nodes.append(record)
        return json.dumps({**_NODES, "nodes": nodes})

    def _partitions(self) -> str:
        lines = []
        for partition in dict.fromkeys(n.partition for n in self.nodes):
            names = ",".join(n.name for n in self.nodes if n.partition == partition)
            words = [w for w in _PARTITION_LINE.split(" ") if not w.startswith(("PartitionName=", "Nodes="))]
            lines.append(" ".join([f"PartitionName={partition}", f"Nodes={names}", *words]))
        return "\n".join(lines) + "\n"
