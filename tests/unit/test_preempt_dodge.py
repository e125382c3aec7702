"""No job dodges a preemption through its own group folder (issue 31, item 4).

A BE job's user owns its group spool folder, where the daemon writes the intent file before the grace signal. A
directory, a symlink or a FIFO planted at `preempt-<jobid>` (or an intent file turned into a directory during the
grace) must never spare the job: it is signalled all the same, requeued at the daemon's own deadline (kept in its
store), and the TE job it was chosen for starts. Driven through real cycles of slurmxd against the model slurmctld
(tests/parity/model_slurm.py), with real files owned by a real other uid.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner

from slurmx.cli.preempt import preempt_command
from slurmx.core import tag
from slurmx.core.config import SiteConfig, parse_site_config
from slurmx.core.model import JobClass
from slurmx.core.resources import Resources
from slurmx.daemon import preemption as pre
from slurmx.daemon.loop import Daemon
from slurmx.daemon.store import Store
from slurmx.policies import make_policy
from slurmx.slurm import CliSlurm, SlurmAdapter
from tests.parity.model_slurm import ModelNode, ModelSlurm

EPOCH = 1_790_000_000
GRACE = 30
BOB = 2001  # the model slurmctld's jobs run as this uid; their group folders are his
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="folders owned by another uid need root to chown")


def _site(tmp: Path) -> SiteConfig:
    return parse_site_config({
        "cluster": {"name": "t"},
        "resources": {"cpu": {"partition": "cpu", "cpus": 1, "mem": "500M"}},
        "policy": {"name": "fitgpp", "params": {}},
        "preemption": {"grace": GRACE},
        "daemon": {"state_dir": str(tmp / "state"), "start_timeout": 86_400},
        "submit": {"spool_dir": str(tmp / "spool")},
        "profile": {"enabled": False},
    })


def _chown_tree(path: Path, uid: int) -> None:
    os.chown(path, uid, uid, follow_symlinks=False)
    if path.is_dir() and not path.is_symlink():
        for child in path.iterdir():
            _chown_tree(child, uid)


@dataclass
class World:
    """One node, one BE job of bob's filling it, then a TE job that needs the node: FitGpp's victim is the BE job."""

    tmp: Path
    model: ModelSlurm = field(init=False)
    site: SiteConfig = field(init=False)
    daemon: Daemon = field(init=False)
    now: list[float] = field(default_factory=lambda: [float(EPOCH)])
    be: int = 0
    te: int = 0

    def __post_init__(self) -> None:
        self.site = _site(self.tmp)
        spool = self.tmp / "spool"
        spool.mkdir()
        spool.chmod(0o1777)
        (self.tmp / "state").mkdir()
        for group in ("be", "te"):  # as `slurmx submit` leaves them: bob's alone
            (spool / group).mkdir(mode=0o700)
            os.chown(spool / group, BOB, BOB)
        self.model = ModelSlurm([ModelNode("c1", "cpu", Resources(4, 8000))], uid=BOB, user="bob")
        self.be = self.model.add("be@cpu", "cpu", self.site.qos_for(JobClass.BE),
                                 tag.encode(tag.GroupTag("be", "cpu", "be", grace_s=GRACE, estimate_s=10_000)),
                                 Resources(4, 8000), 10_000, EPOCH)
        self.daemon = Daemon(self.site, CliSlurm(self.model), Store(self.tmp / "state" / "slurmxd.sqlite"),
                             make_policy("fitgpp", {}), clock=lambda: self.now[0])
        self.cycle(0)
        assert self.model.jobs[self.be].state == "RUNNING"

    @property
    def folder(self) -> Path:
        return self.tmp / "spool" / "be"

    @property
    def intent(self) -> Path:
        return self.folder / f"preempt-{self.be}"

    def cycle(self, t: float) -> None:
        self.now[0] = EPOCH + t
        self.model.advance(self.now[0])
        self.daemon.cycle()

    def submit_te(self, t: float) -> None:
        self.te = self.model.add("te@cpu", "cpu", self.site.qos_for(JobClass.TE),
                                 tag.encode(tag.GroupTag("te", "cpu", "te", grace_s=GRACE, estimate_s=100)),
                                 Resources(4, 8000), 100, EPOCH + int(t))

    def audit(self) -> list[str]:
        return [e.detail for e in self.daemon.store.history("be", 500)][::-1]


def _plant_dir(path: Path) -> None:
    path.mkdir()
    (path / "keep").write_text("bob\n")  # not empty: no rename or rmdir can take it away


def _plant_fifo(path: Path) -> None:
    os.mkfifo(path)


def _plant_link(path: Path) -> None:
    target = path.parent.parent.parent / "precious"
    target.write_text("precious\n")
    path.symlink_to(target)


def _plant_socket(path: Path) -> None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.close()


PLANTS: dict[str, Callable[[Path], None]] = {
    "directory": _plant_dir, "fifo": _plant_fifo, "symlink": _plant_link, "socket": _plant_socket}


@needs_root
@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_a_plant_at_the_intent_path_never_spares_the_victim(tmp_path: Path, plant: str) -> None:
    world = World(tmp_path)
    PLANTS[plant](world.intent)
    _chown_tree(world.folder, BOB)
    world.submit_te(10)
    world.cycle(10)
    victim = world.model.jobs[world.be]
    assert victim.signalled_at == EPOCH + 10, f"{plant}: not signalled; audit: {world.audit()}"
    for t in range(20, GRACE + 10, 10):  # within the grace: still running, nothing requeued
        world.cycle(t)
        assert victim.state == "RUNNING" and victim.restarts == 0
    world.cycle(GRACE + 10)  # the deadline (t0 + grace) is kept by the daemon itself
    assert victim.restarts == 1 and victim.state == "PENDING" and victim.held
    world.cycle(GRACE + 20)
    assert world.model.jobs[world.te].state == "RUNNING" and world.model.jobs[world.te].nodes == "c1"
    notes = [line for line in world.audit() if "intent file" in line]
    if plant == "directory":  # the only plant a rename cannot replace: said once, with why
        assert notes == [f"job {world.be}: the intent file {world.intent} could not be written (Is a directory); "
                         "signalled anyway, its hook counts its own grace"]
        assert (world.intent / "keep").read_text() == "bob\n"  # bob's plant is left as it is
    else:  # replaced by the daemon's own file (never followed), then removed at the requeue
        assert notes == []
        assert not world.intent.exists() and not world.intent.is_symlink()
        if plant == "symlink":
            assert (tmp_path / "precious").read_text() == "precious\n"


@needs_root
def test_an_intent_turned_into_a_directory_during_the_grace_still_ends_in_a_requeue(tmp_path: Path) -> None:
    world = World(tmp_path)
    world.submit_te(10)
    world.cycle(10)
    assert world.intent.read_text().startswith(f"preempt grace={GRACE} ")
    world.intent.unlink()  # bob swaps the daemon's file for a directory the requeue cannot unlink
    _plant_dir(world.intent)
    _chown_tree(world.folder, BOB)
    world.cycle(GRACE + 10)
    assert world.model.jobs[world.be].restarts == 1
    world.cycle(GRACE + 20)
    assert world.model.jobs[world.te].state == "RUNNING"


class ModelClock:
    """`preempt_many`'s clock and sleep on the model slurmctld's time."""

    def __init__(self, model: ModelSlurm) -> None:
        self.model = model

    def __call__(self) -> float:
        return self.model.now

    def sleep(self, seconds: float) -> None:
        self.model.advance(self.model.now + seconds)


@needs_root
@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_slurmx_preempt_signals_and_requeues_whatever_is_planted(tmp_path: Path, plant: str) -> None:
    world = World(tmp_path)
    PLANTS[plant](world.intent)
    _chown_tree(world.folder, BOB)
    adapter: SlurmAdapter = CliSlurm(world.model)
    clock = ModelClock(world.model)
    [outcome] = pre.preempt_many(adapter, [world.be], GRACE, spool_for=lambda _job: world.folder,
                                 clock=clock, sleep=clock.sleep)
    assert outcome.error is None and outcome.requeued and outcome.action is pre.Settlement.REQUEUE_AT_DEADLINE
    assert world.model.jobs[world.be].signalled_at is None  # requeued: the model forgets the signal
    assert world.model.jobs[world.be].restarts == 1
    assert outcome.waited_s == GRACE
    if plant == "directory":
        assert outcome.note == (f"the intent file {world.intent} could not be written (Is a directory); signalled "
                                "anyway, its hook counts its own grace")
    else:
        assert outcome.note is None


@needs_root
def test_the_admin_command_says_the_intent_file_could_not_be_written(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    world = World(tmp_path)
    _plant_dir(world.intent)
    _chown_tree(world.folder, BOB)
    clock = ModelClock(world.model)
    original = pre.preempt_many
    monkeypatch.setattr("slurmx.cli.preempt.preempt_many",
                        lambda *a, **k: original(*a, **{**k, "clock": clock, "sleep": clock.sleep}))

    @dataclass
    class Context:
        def site(self) -> SiteConfig:
            return world.site

        def adapter(self) -> SlurmAdapter:
            return CliSlurm(world.model)

    result = CliRunner().invoke(preempt_command, [str(world.be)], obj=Context(), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert result.stdout == f"job {world.be}: still running at the deadline ({GRACE} s of grace) after {GRACE} s; " \
                            "requeued\n"
    assert result.stderr == (f"slurmx preempt: note: job {world.be}: the intent file {world.intent} could not be "
                             "written (Is a directory); signalled anyway, its hook counts its own grace\n")


# ------------------------------------------------------------------------------ the job's side: its own grace


HOOK_SH = Path(__file__).resolve().parents[2] / "slurmx" / "hooks" / "hook.sh"


@pytest.mark.parametrize("plant", ["directory", "fifo", "symlink"])
def test_without_the_daemons_intent_file_the_hooks_count_their_own_grace_and_never_block(
        tmp_path: Path, plant: str) -> None:
    """Whatever sits at the intent path instead of the daemon's file, both hooks fall back to SLURMX_GRACE_S at
    once (a FIFO opened for reading would hang the signal handler until the requeue kills it)."""
    spool = tmp_path / "spool" / "g"
    spool.mkdir(parents=True)
    intent = spool / "preempt-77"
    if plant == "symlink":  # a link to a real intent line: not the daemon's file, not read
        (tmp_path / "forged").write_text("preempt grace=1 deadline=1000 reason=x\n")
        intent.symlink_to(tmp_path / "forged")
    else:
        PLANTS[plant](intent)
    env = {"PATH": os.environ["PATH"], "SLURMX_SPOOL_DIR": str(spool), "SLURM_JOB_ID": "77", "SLURMX_GRACE_S": "45"}
    code = ("import time; from slurmx.hooks import _env; t = time.time(); "
            "print(round(_env.preempt_deadline(t, _env.grace_seconds()) - t))")
    python = subprocess.run([sys.executable, "-c", code], env={**env, "PYTHONPATH": str(HOOK_SH.parents[2])},
                            capture_output=True, text=True, timeout=20, check=True)
    assert python.stdout == "45\n"
    shell = subprocess.run(["bash", "-c", f'source {HOOK_SH}; t=$(date +%s); _slurmx_set_deadline; '
                                          'echo $((SLURMX_GRACE_DEADLINE - t))'],
                           env=env, capture_output=True, text=True, timeout=20, check=True)
    assert shell.stdout.strip() in ("45", "46")  # the hook reads the clock after t: the same second or the next
