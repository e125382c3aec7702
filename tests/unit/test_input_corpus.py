"""Issue 19's inputs that ended in a traceback or a hang: each is now one line naming the file and the fix.

Every case is the exact input that failed, so a regression shows up here by name.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from slurmx.core.config import load_site_config
from slurmx.core.resources import Resources
from slurmx.core.units import UnitError, parse_duration, parse_mem
from slurmx.core.validation import ConfigError
from slurmx.daemon.site_check import load_checked_site
from slurmx.sim.config import load_sim_config
from slurmx.sim.jobs import SimJob, SimVariant
from slurmx.sim.sizing import sized_for_load
from slurmx.sim.sweep import parse_param
from slurmx.submit.spec import load_spec

REPO = Path(__file__).resolve().parents[2]
SITE = (REPO / "site-config" / "test-cluster.yaml").read_text()
SPEC = "name: hello\ncommand: echo hi\nvariants: [cpu]\nclass: be\ntime: 5m\n"
SIM = ("seed: 1\n"
       "cluster: {partitions: [{name: gpu, nodes: 2, cpus: 8, mem: 64G, gres: 'gpu:4'}]}\n"
       "policy: {name: fifo}\n"
       "workload: {generator: fitgpp, params: {n_jobs: 10, nodes: 2}}\n")
HUGE = "1" + "0" * 400
TOO_LARGE = "is too large; the largest is 9223372036854775807"
# Under 500 bytes (the issue's was 481): nine levels of nine aliases each, about 387 million strings once expanded.
BOMB = "".join(f"{name}: &{name} [{', '.join([f'*{prev}'] * 9) if prev else ', '.join(['lol'] * 9)}]\n"
               for prev, name in zip(["", *"abcdefgh"], "abcdefghi", strict=True))

LOADERS: dict[str, Callable[[Path], Any]] = {"spec": load_spec, "site": load_site_config, "sim": load_sim_config,
                                             "check": load_checked_site}  # `slurmx config check`, slurmxd start

CASES: list[tuple[str, str, bytes, str]] = [
    ("spec-latin1", "spec", SPEC.encode() + b"# caf\xe9\n", "line 6: byte 0xe9 is not UTF-8; save the file as UTF-8"),
    ("site-latin1", "site", SITE.encode().replace(b"slurmx-test", b"slurmx-t\xff"),
     "line 5: byte 0xff is not UTF-8; save the file as UTF-8"),
    ("sim-latin1", "sim", b"# \xff\n" + SIM.encode(), "line 1: byte 0xff is not UTF-8; save the file as UTF-8"),
    ("spec-time-list", "spec", SPEC.replace("time: 5m", "time: [5m]").encode(),
     "time: expected a duration like 90s, 5m or 2-00:00:00, got ['5m']"),
    ("spec-time-map", "spec", SPEC.replace("time: 5m", "time: {a: 1}").encode(),
     "time: expected a duration like 90s, 5m or 2-00:00:00, got {'a': 1}"),
    ("spec-mem-list", "spec", (SPEC + "mem: [1]\n").encode(),
     "mem: expected a memory size like 32G or 1500M, got [1]"),
    ("spec-time-huge", "spec", SPEC.replace("time: 5m", f"time: {HUGE}").encode(),
     f"line 5, column 7: number {HUGE[:20]}... {TOO_LARGE}"),
    ("spec-mem-huge", "spec", (SPEC + f"mem: {HUGE}\n").encode(),
     f"line 6, column 6: number {HUGE[:20]}... {TOO_LARGE}"),
    ("spec-time-huge-text", "spec", SPEC.replace("time: 5m", f"time: '{'9' * 400}s'").encode(),
     f"time: duration '{'9' * 56}... is too large"),
    ("site-grace-huge", "site", SITE.replace("grace: 30s", f"grace: {HUGE}").encode(),
     f"line 34, column 10: number {HUGE[:20]}... {TOO_LARGE}"),
    ("site-mem-inf", "site", SITE.replace("mem: 500M", "mem: .inf", 1).encode(),
     "line 12, column 10: number '.inf' is not finite; write a finite number"),
    ("sim-mem-huge", "sim", SIM.replace("mem: 64G", f"mem: {HUGE}").encode(),
     f"line 2, column 60: number {HUGE[:20]}... {TOO_LARGE}"),
    ("sim-nodes-huge", "sim", SIM.replace("nodes: 2, cpus", f"nodes: {HUGE}, cpus").encode(),
     f"line 2, column 43: number {HUGE[:20]}... {TOO_LARGE}"),
    ("sim-nodes-too-many", "sim", SIM.replace("nodes: 2, cpus", "nodes: 100000000000, cpus").encode(),
     "cluster.partitions[0].nodes: must be <= 1000000, got 100000000000"),
    ("sim-gres-huge", "sim", SIM.replace("'gpu:4'", "'gpu:99999999999999999999999'").encode(),
     "cluster.partitions[0].gres: GRES count in 'gpu:99999999999999999999999' is too large"),
    ("sim-scalar", "sim", b"42\n", "expected a mapping of keys at top level, got int"),
    ("sim-string", "sim", b"fifo\n", "expected a mapping of keys at top level, got str"),
    ("sim-list", "sim", b"[1, 2]\n", "expected a mapping of keys at top level, got list"),
    ("spec-alias-bomb", "spec", BOMB.encode(),
     "line 5: more than 20,000 values once aliases are expanded; write the values out or shorten the file"),
    ("site-alias-bomb", "site", BOMB.encode(),
     "line 5: more than 20,000 values once aliases are expanded; write the values out or shorten the file"),
    ("spec-deep", "spec", ("a: " + "[" * 5000 + "]" * 5000 + "\n").encode(),
     "line 1: nested more than 64 levels deep; flatten it"),
    ("spec-list-key", "spec", b"? [1]\n: 2\n", "line 1, column 3: a list or mapping cannot be a key; write a name"),
    ("site-one-qos", "site", SITE.replace("be: {qos: be}", "be: {qos: te}").encode(),
     "classes: te and be both use QOS 'te'; give each class its own QOS (slurmxd tells the classes apart by it)"),
    ("site-mem-512K", "site", SITE.replace("mem: 500M", "mem: 512K", 1).encode(),
     "resources.cpu.mem: '512K' is below 1 MiB, the smallest amount Slurm requests; write e.g. 1M"),
    ("site-key-typo", "site", SITE.replace("    partition: cpu\n", "    partiton: cpu\n").encode(),
     "resources.cpu.partiton: unknown key; did you mean partition? valid keys: partition, cpus, mem, gres, template, "
     "extra_flags, time"),
    ("check-missing-template", "check",
     SITE.replace("gres: gpu:1\n", "gres: gpu:1\n    template: gpu2.sh.j2\n").encode(),
     "resources.gpu.template: no template 'gpu2.sh.j2' in slurmx's own templates (accel.sh.j2, cpu.sh.j2, gpu.sh.j2, "
     "profile.sh.j2, sensitivity.sh.j2); fix the name, add the file, or remove the key for the base template"),
    ("check-policy-param", "check", SITE.replace("params: {}", "params: {backfil: true}").encode(),
     "policy.params.backfil: unknown key; did you mean backfill? valid keys: backfill, backfill_depth, cadence, "
     "backfill_interval_s, backfill_window_s, backfill_resolution_s"),
    ("check-sampling-key", "check", (SITE + "profile: {sampling: {max_sample: 3}}\n").encode(),
     "profile.sampling.max_sample: unknown key; did you mean max_samples? valid keys: overhead_budget, long_to_short, "
     "zero_step_short, min_steps, cut_factor, qos, max_samples, max_cpus, max_gres, time_limit_factor, "
     "default_time_limit_s, search_steps, search_cpus"),
    ("spec-too-big", "spec", SPEC.encode() + b"#" * (1 << 20), "larger than 256 KiB; a config this large is a "
     "mistake, keep data in files it names"),
]

# A bomb or a pathological parse costs minutes of CPU; a sound parse a fraction of a second, a few times that when
# the machine is busy (CPU time, not wall: `make test` builds the cluster images while these run).
BOMB_CPU_S = 8.0


def test_the_bomb_is_as_small_as_the_issue_s() -> None:
    assert len(BOMB) < 500


@pytest.mark.parametrize(("kind", "data", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_bad_input_is_one_line_naming_the_file(tmp_path: Path, kind: str, data: bytes, message: str) -> None:
    path = tmp_path / "input.yaml"
    path.write_bytes(data)
    started = time.process_time()  # CPU time: a bomb costs it on any machine, a busy machine only wall time
    with pytest.raises(ConfigError) as info:
        LOADERS[kind](path)
    assert time.process_time() - started < BOMB_CPU_S
    assert str(info.value) == f"{path}: {message}"
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("value", [[1], {"a": 1}, None, b"5m", 10**400, -1, float("nan"), "9" * 5000])
def test_units_refuse_wrong_types_and_huge_numbers_with_unit_error(value: Any) -> None:
    for parse in (parse_duration, parse_mem):
        with pytest.raises(UnitError) as info:
            parse(value)
        assert len(str(info.value)) < 120


def test_sizing_for_a_vanishing_load_is_refused_in_one_line_not_overflowed() -> None:
    job = SimJob("j0", "u", 0.0, {"gpu": SimVariant("gpu", Resources(2, 1000, {"gpu": 1}), 1000.0)})
    with pytest.raises(ValueError, match=r"^cluster.from_trace: sizing gpu for load 1e-300 needs more than "):
        sized_for_load([job], {"gpu": Resources(32, 256_000, {"gpu": 8})}, 1e-300)


def test_a_sweep_param_value_goes_through_the_same_caps_in_one_line() -> None:
    with pytest.raises(ConfigError) as info:
        parse_param(f"seed={HUGE}")
    assert str(info.value) == (f"--param seed: cannot read value '{HUGE[:37]}...': column 1: number {HUGE[:20]}... "
                               f"{TOO_LARGE}")


@pytest.mark.parametrize("value", ["[" + "1," * 19_000 + "1]", "x" * 250_000])
def test_a_huge_value_is_refused_fast_and_quoted_short(tmp_path: Path, value: str) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(f"name: {value}\n")
    started = time.process_time()  # CPU time: a pathological parse is slow on any machine, a busy one is not
    with pytest.raises(ConfigError) as info:
        load_spec(path)
    assert time.process_time() - started < BOMB_CPU_S
    assert str(info.value).startswith(f"{path}: name: expected ") and len(str(info.value)) <= 400


@pytest.mark.parametrize("text", ["#\n" * 130_000, "name: |\n" + "  line\n" * 36_000,
                                  "name: " + " ".join(["word"] * 50_000) + "\n"])
def test_a_file_just_under_the_size_cap_is_read_in_seconds_not_minutes(tmp_path: Path, text: str) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    assert len(text) < 256 * 1024
    started = time.process_time()  # CPU time, as above
    with pytest.raises(ConfigError):
        load_spec(path)
    assert time.process_time() - started < BOMB_CPU_S


# ---------------------------------------------------------------------------------------------- sbatch semantics
# Issue 19's "accepted silently" inputs of `slurmx submit`: each now means what it means to sbatch (the options
# each variant gets are checked) or is refused in one line naming the place and the fix.

SBATCH_CASES: list[tuple[str, str, bytes, list[str], dict[str, list[str]] | str]] = [
    ("spec-time-30-is-minutes", "job.yaml", b"name: j\ncommand: 'true'\ntime: 30\n", [],
     {"cpu": ["--time=00:30:00"], "gpu": ["--time=00:30:00"], "accel": ["--time=00:30:00"]}),
    ("cli-time-30-is-minutes", "job.sh", b"#!/bin/bash\ntrue\n", ["--time=30"],
     {"cpu": ["--time=00:30:00"], "gpu": [], "accel": []}),
    ("directive-time-30-is-minutes", "job.sh", b"#!/bin/bash\n#SBATCH --time=30\ntrue\n", [],
     {"cpu": ["--time=00:30:00"], "gpu": [], "accel": []}),
    ("spec-grace-over-time", "job.yaml", b"name: j\ncommand: 'true'\ngrace: 2h\ntime: 5m\n", [],
     "{path}: grace (02:00:00) must be shorter than time (00:05:00) of variant cpu, or the grace signal comes at "
     "once; shorten grace: or raise time:"),
    ("mem-per-cpu", "job.sh", b"#!/bin/bash\n#SBATCH --mem-per-cpu=4G -c 2\ntrue\n", [],
     {"cpu": ["--mem=8192M", "--cpus-per-task=2"], "gpu": ["--mem=8192M"], "accel": ["--mem=8192M"]}),
    ("gpus-2-not-on-cpu", "job.sh", b"#!/bin/bash\n#SBATCH --gpus=2\ntrue\n", [], {"gpu": ["--gres=gpu:2"]}),
    ("gpus-per-task", "job.sh", b"#!/bin/bash\ntrue\n", ["--gpus-per-task=2"], {"gpu": ["--gres=gpu:2"]}),
    ("ntasks-4", "job.sh", b"#!/bin/bash\n#SBATCH -n 4\ntrue\n", [],
     {"cpu": ["--ntasks=4", "--cpus-per-task=1"], "gpu": ["--ntasks=4"], "accel": ["--ntasks=4"]}),
    ("nodes-range", "job.sh", b"#!/bin/bash\n#SBATCH -N 2-4\ntrue\n", [],
     "{path}:2: --nodes=2-4: a node range lets Slurm choose the count when the job starts, which the policies "
     "cannot plan; give one count (--nodes=2 or --nodes=4)"),
    ("partition-gpu-is-the-gpu-kind", "job.sh", b"#!/bin/bash\n#SBATCH -p gpu\ntrue\n", [], {"gpu": []}),
    ("partition-unknown", "job.yaml", b"name: j\ncommand: 'true'\n", ["-p", "debug"],
     "command line: --partition=debug: 'debug' is the partition of no resource kind; known partitions (kind): "
     "cpu (cpu), gpu (gpu), accel (accel); or choose kinds with --variants"),
    ("array-throttle", "job.sh", b"#!/bin/bash\n#SBATCH --array=1-3%0\ntrue\n", [],
     "{path}:2: --array=1-3%0: %0: a throttle is a count of tasks at once, e.g. 0-9%3"),
    ("dependency-job-id", "job.yaml", b"name: j\ncommand: 'true'\n", ["--dependency=afterok:7"],
     {"cpu": ["--dependency=afterok:7"], "gpu": ["--dependency=afterok:7"], "accel": ["--dependency=afterok:7"]}),
    ("dependency-afternotok", "job.yaml", b"name: j\ncommand: 'true'\n", ["-d", "afternotok:7"],
     "command line: --dependency=afternotok:7: afternotok is not supported on groups: a losing variant is "
     "cancelled, which counts as not ok while the group itself runs fine; use afterok or afterany"),
    ("variant-command-beside-script", "job.yaml",
     b"name: j\nscript: 'echo top'\noverrides: {gpu: {command: echo gpu}}\n", [], {"cpu": [], "gpu": [], "accel": []}),
    ("sbatch-line-ends-only-at-newline", "job.sh", b"#!/bin/bash\n#SBATCH -c 2 #\x0b#SBATCH --mem=9G\ntrue\n", [],
     {"cpu": ["--cpus-per-task=2", "--mem=500M"], "gpu": [], "accel": []}),
    ("crlf-script", "job.sh", b"#!/bin/bash\r\ntrue\r\n", [],
     "{path}:1: the script has DOS line breaks (\\r\\n), which sbatch refuses too; convert it with "
     "`dos2unix {path}`"),
]


@pytest.mark.parametrize(("name", "data", "words", "expected"), [c[1:] for c in SBATCH_CASES],
                         ids=[c[0] for c in SBATCH_CASES])
def test_sbatch_semantics_each_case_works_or_is_one_line(tmp_path: Path, name: str, data: bytes, words: list[str],
                                                         expected: dict[str, list[str]] | str) -> None:
    from slurmx.submit.entry import build_spec
    from slurmx.submit.render import _payload
    from slurmx.submit.submitter import plan_group

    site = load_site_config(REPO / "site-config" / "test-cluster.yaml")
    path = tmp_path / name
    path.write_bytes(data)
    try:
        spec, _ = build_spec(str(path), words, [], site)
        _, _, rendered = plan_group(spec, site, mode="race", source=str(path))
    except ConfigError as exc:
        assert isinstance(expected, str), f"refused: {exc}"
        assert str(exc) == expected.format(path=path)
        return
    assert isinstance(expected, dict), f"accepted, expected {expected!r}"
    options = {r.kind: r.options for r in rendered}
    assert list(options) == list(expected)  # exactly these kinds, in the site's order
    for kind, wanted in expected.items():
        assert set(wanted) <= set(options[kind]), (kind, options[kind])
    if name == "job.sh":
        assert spec.script is not None and spec.script.encode() == data  # byte for byte
    if "overrides" in data.decode():
        assert _payload(spec, "gpu", name).endswith("echo gpu") and _payload(spec, "cpu", name).endswith("echo top")
