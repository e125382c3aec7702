"""The simulator's model cluster: nodes with integer capacity vectors, grouped in partitions, one per kind.

Allocation runs millions of times in a long simulation, so the model keeps plain integer vectors over a fixed
dimension order (cpus, mem_mb, then each GRES name) instead of `Resources` arithmetic, and turns them into the
immutable `Node` objects a policy sees only when they are asked for — and only for nodes whose allocation
changed since the last snapshot. A policy that reads an unchanged node gets the very same `Node` object as
last time, which is what lets a snapshot of a thousand nodes cost a dict copy rather than a thousand builds.

Every allocation is checked: over-allocating a dimension or releasing more than a node holds raises
`SimulationInvariantError` naming the node, the group and the simulated time.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from operator import add, le, sub
from typing import TypeVar

from slurmx.core.model import Node, Partition
from slurmx.core.placement import Placement
from slurmx.core.resources import Resources
from slurmx.core.snapshot import LentSnapshot

__all__ = [
    "MAX_NODES",
    "ModelCluster",
    "NodeShape",
    "PartitionShape",
    "SimulationError",
    "SimulationInvariantError",
    "Vector",
]

Vector = tuple[int, ...]
_L = TypeVar("_L", int, str)  # how a first-fit walk names a node: its index or its name

# The model builds every node: past this a node count is a typo (or a sizing gone wrong), not a cluster to run.
MAX_NODES = 1_000_000


class SimulationError(Exception):
    """The simulation cannot go on: a policy asked for something the simulator does not model or cannot do."""


class SimulationInvariantError(SimulationError):
    """A broken rule of the model world (over-allocation, a double start, lost work): a bug, never an outcome."""


@dataclass(frozen=True, slots=True)
class NodeShape:
    """`count` identical nodes named `prefix` + a zero-padded number, each with the node `features` a variant's
    constraint asks for (Slurm's `Features=`)."""

    count: int
    capacity: Resources
    prefix: str
    features: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "features", tuple(self.features))


@dataclass(frozen=True, slots=True)
class PartitionShape:
    """A partition serving one resource kind, made of groups of identical nodes."""

    name: str
    kind: str
    nodes: tuple[NodeShape, ...]


class _SimNode:
    """Mutable allocation state of one node (its immutable `Node` view lives in `ModelCluster.node_views`)."""

    __slots__ = ("allocated", "capacity", "capacity_res", "features", "index", "name", "partition", "partitions")

    def __init__(self, index: int, name: str, partition: str, capacity: Vector, capacity_res: Resources,
                 features: tuple[str, ...] = ()) -> None:
        self.index = index
        self.name = name
        self.partition = partition
        self.partitions = (partition,)  # as its views show them
        self.capacity = capacity
        self.capacity_res = capacity_res  # what its every view shows: built once
        self.features = features
        self.allocated: list[int] = [0] * len(capacity)


class _FreeTree:
    """One kind's free capacity as a max segment tree per dimension: `cols[d][v]` is the most of dimension d free
    on one node under tree vertex v; the leaves (from `size` on) are the kind's nodes in first-fit order, padded
    with -1 (never fits)."""

    __slots__ = ("cols", "names", "order", "size")

    def __init__(self, order: Sequence[int], names: Sequence[str], capacities: Sequence[Vector]) -> None:
        self.order = tuple(order)
        self.names = tuple(names)  # the same nodes' names: a policy's query reads no index
        size = 1
        while size < len(order):
            size *= 2
        self.size = size
        self.cols: list[list[int]] = []
        for d in range(len(capacities[0])):
            col = [-1] * (2 * size)
            col[size:size + len(order)] = [c[d] for c in capacities]
            for v in range(size - 1, 0, -1):
                col[v] = max(col[2 * v], col[2 * v + 1])
            self.cols.append(col)

    def update(self, row: int, vec: Vector, sign: int) -> None:
        """Node `row` gained (`sign` 1) or lost (-1) `vec`: each dimension it uses climbs until a maximum holds."""
        leaf = self.size + row
        for col, amount in zip(self.cols, vec):  # noqa: B905 (one column per dimension)
            if not amount:
                continue
            v = leaf
            if sign > 0:  # room grew: raise the ancestors below it up to it
                col[v] = free = col[v] + amount
                v >>= 1
                while v and col[v] < free:
                    col[v] = free
                    v >>= 1
                continue
            col[v] -= amount  # room shrank: each ancestor takes its children's maximum until one keeps its own
            v >>= 1
            while v:
                left, right = col[2 * v], col[2 * v + 1]
                best = left if left >= right else right
                if col[v] == best:
                    break
                col[v] = best
                v >>= 1

    def fitting(self, vec: Vector, order: Sequence[_L]) -> Iterator[_L]:
        """The nodes with room for `vec`, in order, each as `order` (`self.order` or `self.names`) gives it: from
        the root, down the leftmost child whose per-dimension maxima all hold it; a vertex can pass on maxima of
        different nodes, so a descent can end above the leaves, and the walk then goes on right of it (never past
        a node that fits)."""
        dims = [(col, amount) for col, amount in zip(self.cols, vec) if amount > 0]  # noqa: B905
        size = self.size
        if not dims:
            yield from order
            return
        if len(dims) > 2:
            yield from self._fitting_many(dims, order)
            return
        (c0, a0), (c1, a1) = dims if len(dims) == 2 else dims * 2
        v = 1
        while True:
            if c0[v] >= a0 and c1[v] >= a1:
                while v < size:
                    v <<= 1
                    if c0[v] >= a0 and c1[v] >= a1:
                        continue
                    v += 1
                    if c0[v] >= a0 and c1[v] >= a1:
                        continue
                    break  # neither child holds it
                else:
                    yield order[v - size]
            while v & 1:  # done with v's subtree: on to the next one to its right
                v >>= 1
            if not v:
                return
            v += 1

    def _fitting_many(self, dims: list[tuple[list[int], int]], order: Sequence[_L]) -> Iterator[_L]:
        """`fitting` for a request on more than two dimensions (GRES): the same walk, every dimension checked."""
        size = self.size
        v = 1
        while True:
            if all(col[v] >= amount for col, amount in dims):
                while v < size:
                    v <<= 1
                    if all(col[v] >= amount for col, amount in dims):
                        continue
                    v += 1
                    if all(col[v] >= amount for col, amount in dims):
                        continue
                    break
                else:
                    yield order[v - size]
            while v & 1:
                v >>= 1
            if not v:
                return
            v += 1


class ModelCluster:
    """Nodes, partitions and the live allocation of each node, with the kind -> partition map of a site."""

    def __init__(self, partitions: Iterable[PartitionShape]) -> None:
        shapes = tuple(partitions)
        if not shapes:
            raise SimulationError("cluster: needs at least one partition")
        gres = sorted({name for p in shapes for s in p.nodes for name in s.capacity.gres})
        self.dims: tuple[str, ...] = ("cpus", "mem_mb", *(f"gres/{g}" for g in gres))
        self._gres = tuple(gres)
        self._gres_set = frozenset(gres)  # checked on every `vector` call: built once
        self._no_gres = (0,) * len(gres)
        self._res_cache: dict[Vector, Resources] = {}
        self.nodes: list[_SimNode] = []
        self.index: dict[str, int] = {}
        self.kinds: dict[str, str] = {}
        self.partitions: dict[str, Partition] = {}
        self.kind_nodes: dict[str, tuple[int, ...]] = {}
        self._kind_names: dict[str, frozenset[str]] = {}
        self.partition_dims: dict[str, Vector] = {}
        for shape in shapes:
            self._add_partition(shape)
        self.node_views: dict[str, Node] = {n.name: self._node_view(n) for n in self.nodes}
        self._stale: set[str] = set()  # nodes whose allocation changed since their view was built
        # First fit per kind from a max segment tree per dimension over the nodes' free capacity (leaves in
        # first-fit order): a query descends only into subtrees whose maxima hold the request, so the first
        # fitting node costs a few dozen comparisons whatever the partition's size, a blocked queue head's
        # "nothing fits" usually one, and a start or a release climbs one path per dimension it changes.
        self._trees: dict[str, _FreeTree] = {}
        rows: dict[int, tuple[_FreeTree, int]] = {}
        for kind, order in self.kind_nodes.items():
            tree = self._trees[kind] = _FreeTree(order, [self.nodes[i].name for i in order],
                                                 [self.nodes[i].capacity for i in order])
            for row, i in enumerate(order):
                rows[i] = (tree, row)
        self._row = [rows[i] for i in range(len(self.nodes))]
        self.used: dict[str, list[int]] = {p: [0] * len(self.dims) for p in self.partitions}

    def _add_partition(self, shape: PartitionShape) -> None:
        if shape.name in self.partitions:
            raise SimulationError(f"cluster: partition {shape.name!r} is defined twice")
        if shape.kind in self.kinds:
            raise SimulationError(f"cluster: kind {shape.kind!r} is served by {self.kinds[shape.kind]!r} and "
                                  f"{shape.name!r}; one partition per kind")
        names: list[str] = []
        for group in shape.nodes:
            width = max(3, len(str(group.count)))
            for i in range(1, group.count + 1):
                name = f"{group.prefix}{i:0{width}d}"
                if name in self.index:
                    raise SimulationError(f"cluster: node name {name!r} is used twice")
                vec = self.vector(group.capacity)
                node = _SimNode(len(self.nodes), name, shape.name, vec, self.resources(vec), group.features)
                self.index[name] = node.index
                self.nodes.append(node)
                names.append(name)
        if not names:
            raise SimulationError(f"cluster: partition {shape.name!r} has no nodes")
        self.kinds[shape.kind] = shape.name
        self.partitions[shape.name] = Partition(shape.name, tuple(names), kind=shape.kind)
        # First-fit order is the order ClusterView.nodes_of_kind uses: by node name.
        self.kind_nodes[shape.kind] = tuple(sorted((self.index[n] for n in names), key=lambda i: self.nodes[i].name))
        total = [0] * len(self.dims)
        for i in self.kind_nodes[shape.kind]:
            total = [a + b for a, b in zip(total, self.nodes[i].capacity, strict=True)]
        self.partition_dims[shape.name] = tuple(total)

    # ---- vectors ---------------------------------------------------------------------------------------

    def node_names_of_kind(self, kind: str) -> frozenset[str]:
        """The names of the nodes serving `kind` (empty for a kind the site lacks); built once per kind."""
        found = self._kind_names.get(kind)
        if found is None:
            found = self._kind_names[kind] = frozenset(self.nodes[i].name for i in self.kind_nodes.get(kind, ()))
        return found

    def vector(self, res: Resources) -> Vector:
        """`res` over this cluster's dimensions; a GRES no node has is an error (nothing could ever hold it)."""
        gres = res.gres
        if not gres:
            return (res.cpus, res.mem_mb, *self._no_gres)
        if not self._gres_set.issuperset(gres):
            unknown = sorted(set(gres) - self._gres_set)
            raise SimulationError(f"no node of this cluster has GRES {', '.join(unknown)} (asked: {res})")
        return (res.cpus, res.mem_mb, *(gres.get(g, 0) for g in self._gres))

    def resources(self, vec: Vector | list[int]) -> Resources:
        """The `Resources` of a vector; one shared immutable object per distinct amount (snapshots reuse them)."""
        key = tuple(vec)
        res = self._res_cache.get(key)
        if res is None:
            res = Resources(vec[0], vec[1], {g: vec[2 + i] for i, g in enumerate(self._gres) if vec[2 + i]})
            if len(self._res_cache) < 65_536:
                self._res_cache[key] = res
        return res

    def admitted(self, kind: str, placement: Placement, vec: Vector) -> list[int]:
        """The nodes of `kind` (first-fit order) whose features and names `placement` admits and whose capacity
        holds `vec`: those that could ever hold such a variant, whatever runs on them now."""
        nodes = self.nodes
        return [i for i in self.kind_nodes.get(kind, ()) if placement.admits(nodes[i].name, nodes[i].features)
                and all(v <= c for v, c in zip(vec, nodes[i].capacity, strict=True))]

    def capacity(self, index: int) -> Vector:
        return self.nodes[index].capacity

    def largest(self, kind: str) -> Vector:
        """Per-dimension maximum over the kind's nodes (what a single-node job could ever get)."""
        caps = [self.nodes[i].capacity for i in self.kind_nodes[kind]]
        return tuple(max(c[d] for c in caps) for d in range(len(self.dims)))

    # ---- allocation ------------------------------------------------------------------------------------

    def first_fit(self, kind: str, vec: Vector) -> int | None:
        """The first node of `kind` (by name) with room for `vec`, as FIFO-style placement would pick it."""
        return next(self.fitting(kind, vec), None)

    def allocate(self, index: int, vec: Vector, group_id: str, now: float) -> None:
        """Hand `vec` on node `index` to a group; raises SimulationInvariantError rather than over-allocate."""
        node = self.nodes[index]
        after = list(map(add, node.allocated, vec))
        if not all(map(le, after, node.capacity)) or min(vec) < 0:
            d = next(d for d, (n, c, v) in enumerate(zip(after, node.capacity, vec, strict=True)) if n > c or v < 0)
            raise SimulationInvariantError(
                f"t={now:g}: over-allocation of node {node.name}: group {group_id} needs {self.dims[d]}={vec[d]} "
                f"but only {node.capacity[d] - node.allocated[d]} of {node.capacity[d]} are free")
        node.allocated = after
        used = self.used[node.partition]
        used[:] = map(add, used, vec)
        self._stale.add(node.name)
        tree, row = self._row[index]
        tree.update(row, vec, -1)

    def release(self, index: int, vec: Vector, group_id: str, now: float) -> None:
        """Give back what a group held on a node; releasing more than is allocated is an invariant error."""
        node = self.nodes[index]
        after = list(map(sub, node.allocated, vec))
        if min(after) < 0:
            d = next(d for d, n in enumerate(after) if n < 0)
            raise SimulationInvariantError(f"t={now:g}: node {node.name} would hold negative {self.dims[d]} "
                                           f"after group {group_id} releases {vec[d]}")
        node.allocated = after
        used = self.used[node.partition]
        used[:] = map(sub, used, vec)
        self._stale.add(node.name)
        tree, row = self._row[index]
        tree.update(row, vec, 1)

    def fitting(self, kind: str, vec: Vector) -> Iterator[int]:
        """Indices of the nodes of `kind` with room for `vec`, in first-fit (name) order, found lazily: read before
        the cluster changes (first fit reads one or a node count)."""
        tree = self._trees[kind]
        return tree.fitting(vec, tree.order)

    def fitting_names(self, kind: str, vec: Vector) -> Iterator[str]:
        """The names of `fitting`'s nodes."""
        tree = self._trees[kind]
        return tree.fitting(vec, tree.names)

    def any_fits(self, kind: str, vec: Vector, indices: Iterable[int]) -> bool:
        """Whether one of the nodes `indices` serves `kind` and has room for `vec`."""
        tree = self._trees.get(kind)
        for i in indices:
            node = self.nodes[i]
            if self._row[i][0] is tree and all(map(le, vec, map(sub, node.capacity, node.allocated))):
                return True
        return False

    def busy_nodes(self) -> list[str]:
        return [n.name for n in self.nodes if any(n.allocated)]

    # ---- what a policy sees ------------------------------------------------------------------------------

    def _node_view(self, node: _SimNode) -> Node:
        allocated = self.resources(node.allocated)
        if not any(node.allocated):
            state = "IDLE"
        elif node.allocated[0] >= node.capacity[0]:
            state = "ALLOCATED"
        else:
            state = "MIXED"
        view = Node(node.name, node.partitions, node.capacity_res, allocated, state, node.features)
        # The model knows what is free (never negative here) and that the node is up: fill Node's memo fields
        # with the shared Resources object instead of letting the first reader subtract.
        object.__setattr__(view, "_free", self.resources([c - a for c, a in zip(node.capacity, node.allocated,
                                                                                  strict=True)]))
        object.__setattr__(view, "_usable", True)
        return view

    def refresh_views(self) -> LentSnapshot[str, Node]:
        """The name -> Node map as a lent snapshot: a node whose allocation changed is rebuilt when read.

        The caller freezes it (`LentSnapshot.freeze`) before the next allocate or release if it is still
        referenced then."""
        return LentSnapshot(self.node_views, self._stale, self._view_of)

    def _view_of(self, name: str) -> Node:
        return self._node_view(self.nodes[self.index[name]])

    def rebuild_views(self) -> dict[str, Node]:
        """Every Node built afresh: the naive reference `refresh_views` is tested and benchmarked against."""
        return {n.name: self._node_view(n) for n in self.nodes}
