"""`JobEnvironment`: where this task of a multi-task job stands (ranks, nodes), for torch.distributed or MPI.

Read from what Slurm sets in each task `srun` starts, so it answers the same in a function job
(`Executor.update_parameters(nodes=2, tasks_per_node=4)`) and in any script; submitit's names. Standard library
only, as every hook module.
"""

from __future__ import annotations

import os
import re

__all__ = ["JobEnvironment", "expand_hostlist"]

_RANGE = re.compile(r"([0-9]+)(?:-([0-9]+))?")


def expand_hostlist(text: str) -> list[str]:
    """Slurm's compressed host list (`c[1-3,7],g1`, `n[01-02]`) -> the names, in order; as `scontrol show
    hostnames` prints them, without a subprocess. One bracket per name, as Slurm writes node lists."""
    names: list[str] = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\][^,]*)?", text):
        head, bracket, rest = part.partition("[")
        if not bracket:
            names.append(head)
            continue
        ranges, _, tail = rest.partition("]")
        for item in ranges.split(","):
            match = _RANGE.fullmatch(item.strip())
            if match is None:
                raise ValueError(f"{text!r}: {item!r} is not a number or a range")
            first, last = match[1], match[2] or match[1]
            names += [f"{head}{n:0{len(first)}d}{tail}" for n in range(int(first), int(last) + 1)]
    return names


class JobEnvironment:
    """This task's place in its job: `global_rank` (0 .. num_tasks-1), `local_rank` on its node, `node` index,
    `hostnames` of the job's nodes, and `master_addr`/`master_port` for a rendezvous (the first node; a port
    derived from the job id, so every task computes the same one)."""

    def __init__(self) -> None:
        env = os.environ
        self.job_id = env.get("SLURM_JOB_ID", "")
        self.global_rank = int(env.get("SLURM_PROCID", "0") or 0)
        self.local_rank = int(env.get("SLURM_LOCALID", "0") or 0)
        self.num_tasks = int(env.get("SLURM_NTASKS", "1") or 1)
        self.node = int(env.get("SLURM_NODEID", "0") or 0)
        self.num_nodes = int(env.get("SLURM_JOB_NUM_NODES", env.get("SLURM_NNODES", "1")) or 1)
        nodelist = env.get("SLURM_JOB_NODELIST", env.get("SLURM_NODELIST", ""))
        self.hostnames = expand_hostlist(nodelist) if nodelist else [os.uname().nodename]
        self.hostname = env.get("SLURMD_NODENAME", os.uname().nodename)
        self.master_addr = self.hostnames[0]
        self.master_port = 20000 + int(env.get("SLURM_JOB_ID", "0") or 0) % 20000

    def export_torch_distributed(self) -> dict[str, str]:
        """Set (and return) what `torch.distributed.init_process_group("env://")` reads: MASTER_ADDR,
        MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE."""
        per_node = max(1, self.num_tasks // max(1, self.num_nodes))
        values = {"MASTER_ADDR": self.master_addr, "MASTER_PORT": str(self.master_port),
                  "RANK": str(self.global_rank), "WORLD_SIZE": str(self.num_tasks),
                  "LOCAL_RANK": str(self.local_rank), "LOCAL_WORLD_SIZE": str(per_node)}
        os.environ.update(values)
        return values

    def __repr__(self) -> str:
        return (f"JobEnvironment(job_id={self.job_id!r}, global_rank={self.global_rank}, local_rank={self.local_rank}"
                f", num_tasks={self.num_tasks}, node={self.node}, num_nodes={self.num_nodes}, "
                f"hostnames={self.hostnames!r})")
