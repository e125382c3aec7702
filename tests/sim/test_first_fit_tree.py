"""The model cluster's first-fit index (a max segment tree per dimension) answers as a scan of every node would, for
partitions of any size (powers of two or not) and requests on one, two or three dimensions (a GRES)."""

from __future__ import annotations

import numpy as np
import pytest

from slurmx.core.resources import Resources
from slurmx.sim.cluster import ModelCluster, NodeShape, PartitionShape


@pytest.mark.parametrize("nodes", [1, 2, 3, 5, 13, 64, 100])
def test_fitting_nodes_are_a_scans_answer_in_order_through_allocations_and_releases(nodes: int) -> None:
    model = ModelCluster([PartitionShape("p", "gpu", (NodeShape(nodes, Resources(8, 64, {"gpu": 4}), "n"),))])
    rng = np.random.default_rng(nodes)
    held: list[tuple[int, tuple[int, ...]]] = []
    for step in range(2000):
        vec = (int(rng.choice([0, 1, 2, 4, 8])), int(rng.choice([0, 1, 16, 64])), int(rng.choice([0, 0, 1, 2, 4])))
        scan = [i for i in model.kind_nodes["gpu"]
                if all(c - a >= v for c, a, v in zip(model.capacity(i), model.nodes[i].allocated, vec, strict=True))]
        assert list(model.fitting("gpu", vec)) == scan
        assert model.first_fit("gpu", vec) == (scan[0] if scan else None)
        if held and (not scan or rng.random() < 0.45):
            index, amount = held.pop(int(rng.integers(len(held))))
            model.release(index, amount, "g", float(step))
        elif scan and any(vec):
            index = scan[int(rng.integers(min(len(scan), 3)))]
            model.allocate(index, vec, "g", float(step))
            held.append((index, vec))
