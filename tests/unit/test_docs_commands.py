"""Every command line the docs show is in one table, and every one that needs no cluster and finishes in seconds runs
here for real (issue 34): a renamed flag, a moved file or a changed output line fails this test, not a reader.

The table, COMMANDS, holds each `slurmx ...`, `slurmxd ...`, `python3 bench/...`, `python3 examples/...` and
`make ...` the docs show (code blocks, inline code and `$(...)` in them, of README.md, docs/**/*.md,
site-config/README.md, examples/**/README*) as one of:
- Run: no cluster, a few seconds: run as a subprocess of the repo's venv in a temp copy of examples/, site-config/,
  bench/ and the recorded Slurm output, with placeholders (GROUP, run.yaml, site.yaml, ...) given concrete values;
  its exit status and one line of its output are checked.
- Slow: no cluster but long (a paper reproduction, a benchmark): the test or make target that covers it must exist.
- Cluster: needs Slurm: the integration test or make target that runs it must exist (one names the unit test on
  stand-in output instead, said where it is; UNTESTED would name a command no test runs: none today).
A command the docs show that the table lacks fails with the doc, the line and the table to add it to.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted({ROOT / "README.md", ROOT / "site-config" / "README.md", *ROOT.glob("examples/**/README*"),
               *(ROOT / "docs").rglob("*.md")})
# A command, after any `VAR=value`s, `nice -n N`, `sudo -u USER` and a venv's `.../bin/` before it.
COMMAND = re.compile(r"(?:[A-Z_]+=\S*\s+)*(?:nice -n \d+\s+)?(?:sudo -u \S+\s+)?(?:\S*/bin/)?"
                     r"(?:(?:slurmxd?|make)\s+\S|python3? (?:bench|examples)/)")


@dataclass(frozen=True)
class Run:
    """Run `argv` (its first word resolved in the venv) in the temp copy with `env` added, after `before` if any, and
    send SIGUSR2 after `usr2_after` seconds if set; expect `status` and `shows` in the output."""
    argv: tuple[str, ...]
    shows: str
    status: int = 0
    env: tuple[tuple[str, str], ...] = ()
    usr2_after: float | None = None
    before: Run | None = None


@dataclass(frozen=True)
class Slow:
    """Needs no cluster but takes long: `covered_by` is a test id (path::name) or `make TARGET` that runs it."""
    covered_by: str


@dataclass(frozen=True)
class Cluster:
    """Needs Slurm (or docker): `covered_by` is the integration test id or `make TARGET` that runs it; None says in
    the open that no test runs it yet (UNTESTED)."""
    covered_by: str | None


SITE = "site-config/test-cluster.yaml"
SPEC = "examples/hello.yaml"
SIM = "examples/sim/fitgpp.yaml"
WHATIF = ("slurmx", "whatif", "--site", SITE, "--sacct", "fixtures/sacct/alone.txt",
          "--nodes", "fixtures/slurm/24.11/nodes.json", "--policy", "fifo,fitgpp,allox")
HELP = Run(("slurmx", "--help"), "Commands:")
CHECK = Run(("slurmx", "config", "check", SITE, "site-config/three-partitions.yaml"),
            "site-config/three-partitions.yaml: ok")
SCHEMA = Run(("slurmx", "config", "schema"), '"$schema": "https://json-schema.org/draft/2020-12/schema"')
SIM_RUN = Run(("slurmx", "sim", "run", SIM), "/work/fitgpp.result.json")  # ./ of the doc's comment
SIM_PLOT = Run(("slurmx", "sim", "run", SIM, "--plot", "out/"), "plot: out/jct_cdf.png")
DRY_RUN = Run(("slurmx", "--site", SITE, "submit", "--dry-run", SPEC),
              "variant gpu (managed): sbatch --job-name=hello@gpu")
LIST = Run(("slurmx", "reproduce", "--list"), "fitgpp")
QUICK = Run(("slurmx", "reproduce", "mlfs", "--quick"), "all checks hold")
# examples/README.md's "Without Slurm" block (PYTHONPATH=$PWD is the repo; /tmp/ckpt a folder of the copy).
TRAIN_ENV = (("PYTHONPATH", str(ROOT)), ("SLURMX_CHECKPOINT_DIR", "ckpt"), ("TRAIN_STEP_S", "0.01"))
TRAIN_PREEMPTED = Run(("python3", "examples/train_loop.py", "300"), "CHECKPOINT restart=0", status=99, env=TRAIN_ENV,
                      usr2_after=1.0)
TRAIN_RESUMED = Run(("python3", "examples/train_loop.py", "300"), "DONE steps=300 sum=8955050 expected=8955050",
                    env=(*TRAIN_ENV, ("SLURM_RESTART_COUNT", "1")), before=TRAIN_PREEMPTED)
WHATIF_RUN = Run(WHATIF, "replayed in fifo")
WHATIF_PLOT = Run((*WHATIF, "--json", "whatif.json", "--plot", "out/"), "plot: out/wait_cdf.png")

def live(file: str, test: str) -> Cluster:
    """The integration test `test` in tests/integration/`file`."""
    return Cluster(f"tests/integration/{file}::{test}")


# The integration tests the cluster rows name.
SUBMIT_LIVE = live("test_submit_live.py", "test_managed_group_is_three_leased_variants_and_cancel_leaves_none")
RACE_LIVE = live("test_submit_live.py", "test_race_mode_runs_exactly_one_variant_per_group")
SCRIPT_LIVE = live("test_submit_live.py", "test_unmodified_sbatch_script_submits_and_runs")
OPTIONS_LIVE = live("test_submit_live.py", "test_sbatch_resource_options_apply_per_kind")
SSH_LIVE = live("test_submit_live.py", "test_remote_submit_status_cancel_over_ssh")
ARRAY_LIVE = live("test_arrays_live.py",
                  "test_slurmx_submit_array_is_one_slurm_array_per_kind_and_runs_each_index_once")
WAIT_LIVE = live("test_submit_live.py",
                 "test_wait_on_an_array_returns_when_every_index_ended_and_fails_naming_the_ones_that_failed")
DEPEND_LIVE = live("test_dependency_live.py", "test_a_group_waits_for_the_group_it_depends_on_whichever_variant_ran")
CONSTRAINT_LIVE = live("test_submit_placement_live.py",
                       "test_a_constraint_only_the_gpu_nodes_have_runs_the_group_on_the_gpu_kind")
EXPLAIN_LIVE = live("test_profile_daemon_live.py", "test_sacct_history_replaces_sampling_and_explain_says_so")
PREEMPT_LIVE = live("test_preemption_live.py", "test_train_loop_checkpoints_requeues_and_resumes")
DOCTOR_LIVE = live("test_adapter_live.py", "test_doctor_finds_every_field_slurmx_reads_in_this_release_s_output")
NODES_LIVE = live("test_transports_live.py", "test_cli_lists_nodes_with_gres_through_docker_exec")
DAEMON_LIVE = live("test_daemon_live.py", "test_allox_live_runs_one_variant_per_group_as_the_policy_decides")
DRAIN_LIVE = live("test_failsafe_live.py",
                  "test_drain_hands_every_group_to_slurm_at_once_and_the_daemon_then_decides_nothing")
SHADOW_LIVE = live("test_shadow_live.py", "test_shadow_report_names_every_race_group_and_its_would_be_decision")
UPGRADE_LIVE = live("test_upgrade_live.py",
                    "test_upgrade_from_the_previous_release_with_groups_in_flight_runs_each_once_and_keeps_the_grace")
SWEEP_LIVE = live("test_sweep_live.py", "test_eight_points_on_a_job_array_give_the_local_numbers")
FIDELITY_LIVE = live("test_fidelity_live.py", "test_allox_live_picks_the_simulators_variants_in_its_order")
INSTALL_LIVE = live("test_install_live.py",
                    "test_the_shipped_unit_runs_slurmxd_as_its_own_user_under_systemd_and_doctor_is_green")
UNTESTED = Cluster(None)  # a command no test, live or unit, runs (none today)
SACCT_EXPORT = live("test_submit_live.py", "test_sacct_export_dumps_a_finished_job_and_whatif_replays_the_dump")
# No live test runs restore; the unit tests cover it on stand-in stores.
RESTORE = Cluster("tests/unit/test_backup.py")
# A two-node variant whose srun runs on two hosts, as examples/mpi_hostname.sh's does (not that script itself).
MPI = live("test_submit_placement_live.py", "test_a_two_node_variant_runs_srun_on_two_hosts")

# Reproductions: the quick runs of the same experiments (a full run is minutes to hours).
FITGPP_SLOW = Slow("tests/sim/test_reproduce_fitgpp.py::test_quick_run_reports_every_table_claim_and_figure")
ALLOX_SLOW = Slow("tests/sim/test_reproduce_allox.py::test_quick_run_reports_every_experiment_with_well_formed_claims")
MLFS_SLOW = Slow("tests/sim/test_reproduce_mlfs.py::test_quick_reproduction_runs_every_policy_and_prints_the_claims")
SYNERGY_SLOW = Slow("tests/sim/test_reproduce_synergy.py::"
                    "test_quick_reproduction_runs_every_experiment_and_checks_the_invariant")
ACCEL_SLOW = Slow("tests/sim/test_reproduce_accel.py::test_quick_reproduction_runs_every_figure_and_the_bounds_hold")
SWEEP_SLOW = Slow("tests/sim/test_sweep.py::test_sim_sweep_prints_a_table_and_writes_every_point")
TRACE_SLOW = Slow("tests/sim/test_traces.py")  # the whole-trace loads; the full runs are `make bench`

COMMANDS: dict[str, Run | Slow | Cluster] = {
    # make
    "make bench": Slow("make bench"),
    "make cluster-down": Cluster("make cluster-down"),
    "make cluster-status": Cluster("make cluster-status"),
    "make cluster-up": Cluster("make cluster-up"),
    "make demo": Cluster("make demo"),
    "make dist": Slow("tests/unit/test_install_dist.py"),
    "make lint": Slow("make lint"),
    "make test": Cluster("make test"),
    "make test-daemon-crash": Cluster("make test-daemon-crash"),
    "make test-matrix": Cluster("make test-matrix"),
    "make venv": Slow("make venv"),
    # bench
    "python3 bench/accel_batch.py": Slow("make bench"),
    "python3 bench/mlfs.py --repeat 5": Slow("make bench"),
    "python3 bench/synergy.py": Run(("python3", "bench/synergy.py"), '"name": "synergy"'),
    "PYTHONPATH=. python bench/daemon_cycle.py": Slow("make bench"),
    "python bench/fitgpp.py": Slow("make bench"),
    "python bench/peer_accasim.py": Slow("make bench"),
    "python bench/easy_backfill.py": Slow("make bench"),
    "nice -n 10 .venv/bin/python bench/sim_engine.py --jobs 100000": Slow("make bench"),
    # make bench runs bench/sim_engine.py at its default 100,000 jobs only: nothing runs the 1M-job case.
    "PYTHONPATH=. python bench/sim_engine.py --million": Slow("make bench"),
    # examples
    "python3 examples/train_loop.py 300 & sleep 1; kill -USR2 $!; wait $!": TRAIN_PREEMPTED,
    "SLURM_RESTART_COUNT=1 python3 examples/train_loop.py 300": TRAIN_RESUMED,
    # slurmx: no cluster
    "slurmx --help": HELP,
    "slurmx config check": Run(("slurmx", "config", "check"), "site-config/test-cluster.yaml: ok",
                               env=(("SLURMX_SITE", SITE),)),  # without FILE: the site slurmx uses
    "slurmx config check /etc/slurmx/site.yaml": CHECK,
    "slurmx config check FILE": CHECK,
    "slurmx config check FILE...": CHECK,
    "slurmx config check site.yaml": CHECK,
    "slurmx config schema": SCHEMA,
    "slurmx config schema > slurmx-site.schema.json": SCHEMA,
    "slurmx reproduce": LIST,
    "slurmx reproduce --list": LIST,
    "slurmx reproduce PAPER --quick": QUICK,
    "slurmx reproduce mlfs --quick": QUICK,
    "slurmx reproduce allox --quick": Run(("slurmx", "reproduce", "allox", "--quick"), "all checks hold"),
    "slurmx reproduce fitgpp --quick": Run(("slurmx", "reproduce", "fitgpp", "--quick"), "all checks hold"),
    "slurmx reproduce PAPER": FITGPP_SLOW,
    "slurmx reproduce PAPER [--quick] [--seeds N] [--workers N] [--only NAME] [--json PATH] [--plot DIR] [--strict]":
        FITGPP_SLOW,
    "slurmx reproduce accel": ACCEL_SLOW,
    "slurmx reproduce accel --only fig2 --workers 1": ACCEL_SLOW,
    "slurmx reproduce accel --plot DIR": ACCEL_SLOW,
    "slurmx reproduce allox": ALLOX_SLOW,
    "slurmx reproduce allox --only authors-sim": Slow("tests/unit/test_allox_authors_sim_options.py"),
    "slurmx reproduce allox --only authors-sim --workers 2": Slow("tests/unit/test_allox_authors_sim_options.py"),
    "slurmx reproduce allox --only authors-sim --workers 2 --json out.json":
        Slow("tests/unit/test_allox_authors_sim_options.py"),
    "slurmx reproduce allox --only main --seeds 5 --workers 2 --json out.json --plot plots/": ALLOX_SLOW,
    "slurmx reproduce fitgpp": FITGPP_SLOW,
    "slurmx reproduce fitgpp --workers 1 --seeds 2 --only main --only intervals --only preempted": FITGPP_SLOW,
    "slurmx reproduce fitgpp --workers 2 --seeds 8 --only main --only intervals --only preempted": FITGPP_SLOW,
    "slurmx reproduce mlfs": MLFS_SLOW,
    "slurmx reproduce mlfs --only sweep": MLFS_SLOW,
    "slurmx reproduce mlfs --seeds 4": MLFS_SLOW,
    "slurmx reproduce synergy": SYNERGY_SLOW,
    "slurmx reproduce synergy --json out.json": SYNERGY_SLOW,
    "slurmx reproduce synergy --workers 2 --only <experiment>": SYNERGY_SLOW,
    "slurmx sim": Run(("slurmx", "sim", "--help"), "sweep"),
    "slurmx sim run": SIM_RUN,
    "slurmx sim run CONFIG": SIM_RUN,
    "slurmx sim run examples/sim/fitgpp.yaml": SIM_RUN,
    "slurmx sim run examples/sim/fitgpp.yaml --plot out/": SIM_PLOT,
    "slurmx sim run examples/sim/alibaba-fifo.yaml": TRACE_SLOW,
    "slurmx sim run examples/sim/philly-fifo.yaml": TRACE_SLOW,
    "slurmx sim run run.yaml --trace ../shared/traces/pwa_swf/CEA-Curie-2011-2.1-cln.swf.gz": TRACE_SLOW,
    "slurmx sim sweep examples/sim/fitgpp.yaml --param policy=fifo,fitgpp,lrtp,rand --param seed=1,2,3": SWEEP_SLOW,
    "slurmx sim sweep run.yaml --param load=1.0,1.5,2.0 --param policy.params.s=0,4 --json sweep.json": SWEEP_SLOW,
    "slurmx submit --dry-run": DRY_RUN,
    "slurmx submit --dry-run SPEC": DRY_RUN,
    "slurmx --site $site submit --dry-run examples/hello.yaml": DRY_RUN,
    "slurmx whatif": WHATIF_PLOT,
    "slurmx whatif --site site.yaml --sacct october.txt --nodes nodes.json --policy fifo,fitgpp,allox": WHATIF_RUN,
    "slurmx whatif --site site.yaml --sacct october.txt --nodes nodes.json --policy fifo,fitgpp,allox "
    "--json whatif.json --plot out/": WHATIF_PLOT,
    "slurmx whatif --policy slurm": Slow("tests/sim/test_whatif.py::"
                                         "test_slurms_own_scheduling_is_replayed_at_the_cadence_its_config_states"),
    # slurmx: submission and the group commands
    "slurmx submit": SUBMIT_LIVE,
    "slurmx submit SPEC.yaml": SUBMIT_LIVE,
    "slurmx submit job.yaml": SUBMIT_LIVE,
    "slurmx --site $site submit examples/hello.yaml": SUBMIT_LIVE,
    "slurmx --site $site submit --mode race examples/hello.yaml": RACE_LIVE,
    "slurmx submit --mode race examples/mpi_hostname.sh": MPI,
    "slurmx --site $site submit --variants cpu,gpu legacy.sh arg1": SCRIPT_LIVE,
    "slurmx submit job.sh": SCRIPT_LIVE,
    "slurmx submit train.sh --epochs 5": SCRIPT_LIVE,
    "slurmx --site $site submit -p gpu --time=30 --mem-per-cpu=2G legacy.sh": OPTIONS_LIVE,
    "slurmx submit -p gpu --time=30 train.sh": OPTIONS_LIVE,
    "slurmx submit --mode race -C nvlink train.sh": CONSTRAINT_LIVE,
    "slurmx submit --array=0-9%3": ARRAY_LIVE,
    "slurmx submit --array=0-999%10": ARRAY_LIVE,
    "slurmx submit --array=1-3 sweep.sh": ARRAY_LIVE,
    'slurmx submit --dependency=afterok:"$prep" train.sh': DEPEND_LIVE,
    'slurmx --site "$site" submit --mode pick --pick cpu --chdir="$ex" examples/train_loop.yaml': PREEMPT_LIVE,
    "slurmx --host alice@login.example.org submit job.yaml": SSH_LIVE,
    "slurmx --site $site submit --parsable --wait job.yaml": WAIT_LIVE,
    "slurmx submit --parsable train.sh": SCRIPT_LIVE,
    "slurmx submit --parsable prepare.sh": DEPEND_LIVE,
    "slurmx hook --path bash": Run(("slurmx", "hook", "--path", "bash"), "slurmx/hooks/hook.sh"),
    "slurmx --site": SACCT_EXPORT,
    "slurmx status": SUBMIT_LIVE,
    'slurmx status "$gid"': SUBMIT_LIVE,
    "slurmx status GROUP": SUBMIT_LIVE,
    "slurmx status GROUP[i]": ARRAY_LIVE,
    "slurmx status [GROUP]": SUBMIT_LIVE,
    "slurmx --site $site status GROUP": SUBMIT_LIVE,
    "slurmx --site $site groups": SSH_LIVE,
    "slurmx cancel": SUBMIT_LIVE,
    "slurmx cancel GROUP": SUBMIT_LIVE,
    "slurmx --site $site cancel GROUP": SUBMIT_LIVE,
    "slurmx explain": EXPLAIN_LIVE,
    "slurmx explain GROUP": EXPLAIN_LIVE,
    "slurmx preempt": PREEMPT_LIVE,
    "slurmx preempt JOB --grace 20": PREEMPT_LIVE,
    'slurmx --site "$site" preempt 168 --grace 20': PREEMPT_LIVE,
    "slurmx --site $site preempt JOBID --grace 60": PREEMPT_LIVE,
    "slurmx doctor": DOCTOR_LIVE,
    "slurmx nodes": NODES_LIVE,
    "slurmx jobs --json": Cluster("tests/integration/test_executor_live.py"),
    "slurmx sacct-export": SACCT_EXPORT,
    "slurmx --site site.yaml sacct-export --since 2026-10-01 --until 2026-11-01 --out october.txt": SACCT_EXPORT,
    "slurmx fidelity": FIDELITY_LIVE,
    "slurmx fidelity mixed --site ADMIN-SITE --policy P": FIDELITY_LIVE,
    "slurmx fidelity mixed --site admin-site.yaml --policy allox": FIDELITY_LIVE,
    "slurmx sim sweep --slurm": SWEEP_LIVE,
    "slurmx --site $site sim sweep run.yaml --param seed=1,2,3,4 --slurm": SWEEP_LIVE,
    "slurmx --site /var/tmp/slurmx-cluster/24.11/site.yaml sim sweep run.yaml --param seed=1,2,3,4 --slurm": SWEEP_LIVE,
    "slurmx shadow-report": SHADOW_LIVE,
    "slurmx --site site.yaml shadow-report": SHADOW_LIVE,
    "slurmx --site /etc/slurmx/site.yaml shadow-report": SHADOW_LIVE,
    "slurmx --site /etc/slurmx/site.yaml shadow-report --json out.json": SHADOW_LIVE,
    "slurmx --site /etc/slurmx/site.yaml shadow-report --since 1d": SHADOW_LIVE,
    # slurmxd
    "slurmxd --site /etc/slurmx/site.yaml": DAEMON_LIVE,
    "/opt/slurmx/bin/slurmxd --version": Run(("slurmxd", "--version"), "slurmxd, version "),
    "sudo -u slurmx /opt/slurmx-0.2.0/bin/slurmxd --site /etc/slurmx/site.yaml backup "
    "/var/lib/slurmx/before-0.2.0.sqlite": UPGRADE_LIVE,
    # A dry-run Daemon observes and decides on the live cluster (in process, not through the command line).
    "slurmxd --site site.yaml --once --dry-run": live("test_cycle_live.py",
                                                      "test_a_specs_own_grace_is_the_grace_fitgpp_scores_and_slurmxd_grants"),
    "slurmxd --json-logs": INSTALL_LIVE,
    "slurmxd --shadow": SHADOW_LIVE,
    "slurmxd --site site.yaml --shadow": SHADOW_LIVE,
    "slurmxd --site /etc/slurmx/site.yaml --shadow": SHADOW_LIVE,
    "slurmxd --site /etc/slurmx/site.yaml --shadow --once": SHADOW_LIVE,
    "slurmxd drain": DRAIN_LIVE,
    "slurmxd --site site.yaml drain": DRAIN_LIVE,
    "slurmxd --site /etc/slurmx/site.yaml drain": DRAIN_LIVE,
    "slurmxd resume": DRAIN_LIVE,
    "slurmxd --site /etc/slurmx/site.yaml resume": DRAIN_LIVE,
    "slurmxd backup": UPGRADE_LIVE,
    "slurmxd backup FILE": UPGRADE_LIVE,
    "slurmxd backup /var/lib/slurmx/backups/slurmxd-$(date +%F).sqlite": UPGRADE_LIVE,
    "slurmxd --site /etc/slurmx/site.yaml backup FILE": UPGRADE_LIVE,
    "slurmxd restore": RESTORE,
    "slurmxd restore FILE": RESTORE,
    "slurmxd --site /etc/slurmx/site.yaml restore FILE": RESTORE,
}


def _shown() -> list[tuple[str, int, str]]:
    """(doc, line, command) for every command in a code block (a trailing `\\` joins the next line) or a code span,
    and inside a `$(...)` there; a comment, a `$ ` prompt and `;`/`&&` between commands are cut, so each command is
    one table key."""
    found = []
    for doc in DOCS:
        lines = doc.read_text().splitlines()
        in_block, i = False, 0
        while i < len(lines):
            line, number = lines[i], i + 1
            if line.lstrip().startswith("```"):
                in_block = not in_block
            else:
                if in_block:
                    while line.rstrip().endswith("\\") and i + 1 < len(lines):
                        i += 1
                        line = line.rstrip()[:-1] + " " + lines[i].strip()
                for text in [line] if in_block else re.findall(r"`([^`\n]+)`", line):
                    text = text.split(" #")[0].strip().removeprefix("$ ")
                    inner = re.findall(r"\$\(((?:slurmxd?|make)\s[^()]*)\)", text)  # gid=$(slurmx ...)
                    for command in [*re.split(r"\s+(?:;|&&)\s+", text), *inner]:
                        command = " ".join(command.split())
                        if COMMAND.match(command):
                            found.append((doc.relative_to(ROOT).as_posix(), number, command))
            i += 1
    return found


def test_every_command_the_docs_show_is_in_the_table() -> None:
    missing = [f"{doc}:{line}: `{command}` is in no table: add it to COMMANDS in tests/unit/test_docs_commands.py"
               " as Run, Slow or Cluster" for doc, line, command in _shown() if command not in COMMANDS]
    assert not missing, "\n".join(missing)


def test_every_row_of_the_table_is_still_in_the_docs() -> None:
    shown = {command for _, _, command in _shown()}
    assert not [command for command in COMMANDS if command not in shown], "rows no doc shows any more: remove them"


def _exists(ref: str) -> bool:
    """A `make TARGET` the Makefile defines, or a test file (path) or test (path::name) that exists."""
    if ref.startswith("make "):
        target = re.escape(ref.removeprefix("make "))
        return re.search(rf"^{target}:", (ROOT / "Makefile").read_text(), re.M) is not None
    path, _, name = ref.partition("::")
    file = ROOT / path
    return file.is_file() and (not name or re.search(rf"^def {name}\(", file.read_text(), re.M) is not None)


@pytest.mark.parametrize("row", sorted({row for row in COMMANDS.values() if not isinstance(row, Run)
                                         and row.covered_by is not None}, key=repr), ids=repr)
def test_what_covers_a_slow_or_cluster_command_exists(row: Slow | Cluster) -> None:
    assert row.covered_by is not None and _exists(row.covered_by), f"{row}: no such test or make target"


def test_the_untested_commands_are_the_known_ones() -> None:
    """A command no test runs is a gap named here; adding one takes changing this list too."""
    assert sorted(command for command, row in COMMANDS.items() if row == UNTESTED) == []


RUNS = sorted({row for row in COMMANDS.values() if isinstance(row, Run)}, key=repr)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What the commands read, copied: examples/, site-config/, bench/ and the recorded Slurm output."""
    root = tmp_path_factory.mktemp("docs")
    for part in ("examples", "site-config", "bench"):
        shutil.copytree(ROOT / part, root / part)
    for part in ("sacct", "slurm"):
        shutil.copytree(ROOT / "tests" / "fixtures" / part, root / "fixtures" / part)
    return root


def _run(row: Run, work: Path) -> tuple[int, str]:
    """Exit status and output (stdout then stderr) of `row` run in `work`."""
    if row.before is not None:
        _run(row.before, work)
    program = sys.executable if row.argv[0] == "python3" else str(Path(sys.executable).parent / row.argv[0])
    env = {**os.environ, **dict(row.env)}
    with subprocess.Popen(["nice", "-n", "10", program, *row.argv[1:]], cwd=work, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        first = ""
        if row.usr2_after is not None and process.stdout is not None:
            first = process.stdout.readline()  # started (a loaded machine can take longer than the doc's sleep)
            time.sleep(row.usr2_after)
            process.send_signal(signal.SIGUSR2)
        out, err = process.communicate(timeout=120)
    return process.returncode, first + out + err


@pytest.mark.parametrize("row", RUNS, ids=lambda row: " ".join((*row.argv, *(["(resumed)"] if row.before else []))))
def test_a_command_that_needs_no_cluster_runs_as_the_docs_show(row: Run, tree: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    shutil.copytree(tree, work)
    status, output = _run(row, work)
    assert status == row.status, output[-2000:]
    assert row.shows in output, output[-2000:]


def _only_names() -> list[tuple[str, tuple[str, ...]]]:
    """(paper, experiment names) of each slow `slurmx reproduce PAPER ... --only NAME` row."""
    found = set()
    for command, row in COMMANDS.items():
        words = command.split()
        if isinstance(row, Slow) and words[:2] == ["slurmx", "reproduce"] and "--only" in words:
            names = tuple(words[i + 1] for i, word in enumerate(words[:-1])
                          if word == "--only" and not words[i + 1].startswith("<"))
            if names:
                found.add((words[2], names))
    return sorted(found)


@pytest.mark.parametrize(("paper", "names"), _only_names())
def test_the_experiments_a_slow_reproduction_names_exist(paper: str, names: tuple[str, ...], tmp_path: Path) -> None:
    """The long run is not run, but its `--only` names are checked: with one unknown name added, that one alone is
    reported (the names are checked before anything runs)."""
    argv = [str(Path(sys.executable).parent / "slurmx"), "reproduce", paper, "--quick",
            *(f"--only={name}" for name in (*names, "not-an-experiment"))]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1 and "unknown experiment(s) not-an-experiment; choose from" in done.stderr, done.stderr


def test_every_file_of_the_repo_a_command_names_exists() -> None:
    """A script, spec or config a doc command names (examples/..., site-config/..., bench/...) is in the repo, so a
    slow or cluster command cannot name a moved file either."""
    named = {(doc, line, word) for doc, line, command in _shown() for word in re.split(r"[\s=\"']+", command)
             if word.startswith(("examples/", "site-config/", "bench/")) and "$" not in word}
    missing = [f"{doc}:{line}: {word} does not exist" for doc, line, word in sorted(named)
               if not (ROOT / word.rstrip("/")).exists()]
    assert not missing, "\n".join(missing)
    assert len(named) > 10
