"""The job spec: what a valid spec becomes, and the exact one-line error for each kind of bad input.

Every error is `slurmx.core.validation.ConfigError` whose str() is ONE line `<source>: <key.path>: <problem>`,
so the tests compare whole strings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from slurmx.core.config import SiteConfig, parse_site_config
from slurmx.core.model import JobClass
from slurmx.core.validation import ConfigError
from slurmx.submit.render import variant_options
from slurmx.submit.spec import JobSpec, load_spec, parse_spec, resolve_variants

SRC = "job.yaml"
SPEC_KEYS = ("name, command, script, args, variants, overrides, class, grace, checkpoint_dir, work, estimates, "
             "env, modules, cpus, mem, mem_per_cpu, gpus, time, workdir, sbatch, dependency, array, export, output, "
             "error, signal, begin, constraint, nodelist, exclude, exclusive, nodes, ntasks, ntasks_per_node")
OVERRIDE_KEYS = ("command, script, env, modules, cpus, mem, gres, time, sbatch, constraint, nodelist, exclude, "
                 "exclusive, nodes, ntasks, ntasks_per_node")
NAME = "job.yaml: name: expected letters, digits, '_', '.', '-' (at most 64), got {!r}"
RESERVED = "job.yaml: sbatch: {} is set by slurmx (use the spec's own fields); remove it"
MODELLED = "job.yaml: sbatch: {} is what the spec's '{}:' says; write {}: instead"
NOT_SET_HERE = "job.yaml: env: {} is used by slurmx, Slurm or the shell; choose another name"
UNKNOWN_TPU = "job.yaml: variants: the site defines no resource kind 'tpu'; valid kinds: cpu, gpu, accel"


def site() -> SiteConfig:
    return parse_site_config({
        "cluster": {"name": "t"},
        "resources": {
            "cpu": {"partition": "cpu", "cpus": 1, "mem": "500M"},
            "gpu": {"partition": "gpu", "cpus": 1, "mem": "500M", "gres": "gpu:1"},
            "accel": {"partition": "accel", "cpus": 1, "mem": "500M", "gres": "accel:1"},
        },
    })


def spec(**fields: Any) -> dict[str, Any]:
    return {"name": "train", "command": "python train.py", **fields}


def error_of(data: Any, source: str = SRC) -> str:
    with pytest.raises(ConfigError) as info:
        parse_spec(data, source)
    message = str(info.value)
    assert "\n" not in message and "\r" not in message, message
    return message


def refused_before_sbatch(data: dict[str, Any]) -> None:
    """A ConfigError from parsing the spec or from building any variant's options (wherever a fix lands)."""
    with pytest.raises(ConfigError):
        parsed = parse_spec(data, SRC)
        for kind in resolve_variants(parsed, site(), source=SRC):
            variant_options(parsed, site(), kind, "train-000000", "race", SRC)


# ---------------------------------------------------------------------------------------------- valid specs


def test_full_spec_parses_into_typed_fields() -> None:
    parsed = parse_spec({
        "name": "train", "command": "python train.py --epochs 10", "variants": ["cpu", "gpu"], "class": "te",
        "grace": "2m", "work": 10000, "estimates": {"cpu": "2h", "gpu": "20m"}, "env": {"DATA": "/scratch", "N": 3},
        "modules": ["cuda/12.2", "gcc+ofed"], "cpus": 2, "mem": "4G", "time": "1:30:00",
        "checkpoint_dir": "/ckpt", "workdir": "/work", "sbatch": ["--account=proj", "--exclusive=user"],
        "overrides": {"gpu": {"command": "python train.py --cuda", "cpus": 4, "mem": "16G", "gres": "gpu:2",
                              "time": "1h", "env": {"CUDA": "1"}, "modules": ["cuda"],
                              "sbatch": ["--gpu-bind=closest"]}},
    }, SRC)
    assert parsed.variants == ("cpu", "gpu")
    assert parsed.job_class is JobClass.TE
    assert (parsed.grace_s, parsed.time_s, parsed.mem_mb, parsed.cpus) == (120, 5400, 4096, 2)
    assert parsed.estimates == {"cpu": 7200, "gpu": 1200}
    assert parsed.env == {"DATA": "/scratch", "N": "3"}
    assert not hasattr(parsed, "gres")  # a GRES belongs to a resource kind: set it in overrides
    gpu = parsed.overrides["gpu"]
    assert (gpu.cpus, gpu.mem_mb, gpu.gres, gpu.time_s) == (4, 16384, "gpu:2", 3600)
    assert parsed.variant_field("gpu", "command") == "python train.py --cuda"
    assert parsed.variant_field("cpu", "command") == "python train.py --epochs 10"
    assert parsed.variant_field("gpu", "cpus") == 4 and parsed.variant_field("cpu", "cpus") == 2


def test_defaults() -> None:
    parsed = parse_spec(spec(), SRC)
    assert parsed.job_class is JobClass.BE
    assert parsed.variants is None and parsed.grace_s is None and parsed.sbatch == ()
    assert resolve_variants(parsed, site(), source=SRC) == ("cpu", "gpu", "accel")


def test_variants_as_comma_string_and_in_site_order() -> None:
    parsed = parse_spec(spec(variants="accel, cpu"), SRC)
    assert parsed.variants == ("accel", "cpu")
    assert resolve_variants(parsed, site(), source=SRC) == ("cpu", "accel")
    assert resolve_variants(parsed, site(), only=("gpu",), source=SRC) == ("gpu",)


def test_payload_may_come_from_overrides_only() -> None:
    parsed = parse_spec({"name": "t", "overrides": {"cpu": {"command": "true"}}}, SRC)
    assert parsed.command is None and parsed.variant_field("cpu", "command") == "true"


def test_load_spec_reads_yaml(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text("name: train\ncommand: python train.py\nvariants: [gpu]\nmem: 2G\n")
    parsed = load_spec(path)
    assert isinstance(parsed, JobSpec)
    assert (parsed.name, parsed.variants, parsed.mem_mb) == ("train", ("gpu",), 2048)


# ---------------------------------------------------------------------------------------------- bad input

BAD: list[tuple[str, dict[str, Any], str]] = [
    # unknown keys name the valid ones
    ("unknown-key", spec(colour="red"), f"job.yaml: colour: unknown key; valid keys: {SPEC_KEYS}"),
    ("unknown-override-key", spec(overrides={"gpu": {"colour": 1}}),
     f"job.yaml: overrides.gpu.colour: unknown key; valid keys: {OVERRIDE_KEYS}"),
    # time
    ("time-word", spec(time="abc"), "job.yaml: time: expected a duration like 90s, 5m or 2-00:00:00, got 'abc'"),
    ("time-4-fields", spec(time="1:2:3:4"),
     "job.yaml: time: expected a duration like 90s, 5m or 2-00:00:00, got '1:2:3:4'"),
    ("time-negative", spec(time="-5"), "job.yaml: time: expected a duration like 90s, 5m or 2-00:00:00, got '-5'"),
    ("time-zero", spec(time=0), "job.yaml: time: must be > 0, got 0"),
    ("time-unlimited", spec(time="UNLIMITED"), "job.yaml: time: expected a finite duration, got 'UNLIMITED'"),
    ("grace-word", spec(grace="soon"),
     "job.yaml: grace: expected a duration like 90s, 5m or 2-00:00:00, got 'soon'"),
    ("estimate-word", spec(estimates={"cpu": "zz"}),
     "job.yaml: estimates: expected a duration like 90s, 5m or 2-00:00:00, got 'zz'"),
    ("override-time", spec(overrides={"gpu": {"time": "1x"}}),
     "job.yaml: overrides.gpu.time: expected a duration like 90s, 5m or 2-00:00:00, got '1x'"),
    # memory
    ("mem-unit", spec(mem="12X"), "job.yaml: mem: expected a memory size like 32G or 1500M, got '12X'"),
    ("mem-negative", spec(mem="-1G"), "job.yaml: mem: expected a memory size like 32G or 1500M, got '-1G'"),
    ("mem-zero", spec(mem=0), "job.yaml: mem: must be >= 1, got 0"),
    ("override-mem", spec(overrides={"gpu": {"mem": "bad"}}),
     "job.yaml: overrides.gpu.mem: expected a memory size like 32G or 1500M, got 'bad'"),
    # gres (per resource kind only: the top-level key is gone)
    ("gres-top-level", spec(gres="gpu:1"), f"job.yaml: gres: unknown key; valid keys: {SPEC_KEYS}"),
    ("gres-no-count", spec(overrides={"gpu": {"gres": "gpu2"}}),
     "job.yaml: overrides.gpu.gres: expected NAME:COUNT (e.g. gpu:2), got 'gpu2'"),
    ("gres-bad-count", spec(overrides={"gpu": {"gres": "gpu:x"}}),
     "job.yaml: overrides.gpu.gres: expected NAME:COUNT (e.g. gpu:2), got 'gpu:x'"),
    ("gres-index", spec(overrides={"gpu": {"gres": "gpu:1(S:0)"}}),
     "job.yaml: overrides.gpu.gres: expected NAME:COUNT, got 'gpu:1(S:0)'"),
    ("gres-number", spec(overrides={"gpu": {"gres": 5}}), "job.yaml: overrides.gpu.gres: expected NAME:COUNT, got 5"),
    ("override-gres", spec(overrides={"gpu": {"gres": "gpu"}}),
     "job.yaml: overrides.gpu.gres: expected NAME:COUNT (e.g. gpu:2), got 'gpu'"),
    # name
    ("name-space", spec(name="my job"), NAME.format("my job")),
    ("name-empty", spec(name=""), NAME.format("")),
    ("name-shell", spec(name="a;rm"), NAME.format("a;rm")),
    ("name-leading-dash", spec(name="-x"), NAME.format("-x")),
    ("name-65", spec(name="a" * 65), NAME.format("a" * 65)),
    ("name-missing", {"command": "true"}, "job.yaml: name: required key is missing"),
    ("name-number", spec(name=7), "job.yaml: name: expected a string, got 7"),
    # environment
    ("env-slurm", spec(env={"SLURM_FOO": "1"}), NOT_SET_HERE.format("SLURM_FOO")),
    ("env-slurmx", spec(env={"SLURMX_FOO": "1"}), NOT_SET_HERE.format("SLURMX_FOO")),
    ("override-env-slurm", spec(overrides={"gpu": {"env": {"SLURM_X": "1"}}}),
     "job.yaml: overrides.gpu.env: SLURM_X is used by slurmx, Slurm or the shell; choose another name"),
    ("env-digit", spec(env={"1A": "1"}),
     "job.yaml: env: environment variable names are letters, digits and _, got '1A'"),
    ("env-dash", spec(env={"A-B": "1"}),
     "job.yaml: env: environment variable names are letters, digits and _, got 'A-B'"),
    # reserved sbatch flags
    ("sbatch-partition", spec(sbatch=["--partition=gpu"]), MODELLED.format("--partition", "variants", "variants")),
    ("sbatch-qos", spec(sbatch=["--qos", "be"]), MODELLED.format("--qos", "class", "class")),
    ("sbatch-time", spec(sbatch=["--time=5"]), MODELLED.format("--time", "time", "time")),
    ("sbatch-gpus", spec(sbatch=["-G2"]), MODELLED.format("-G", "gpus", "gpus")),
    ("sbatch-mem-per-cpu", spec(sbatch=["--mem-per-c=2G"]), MODELLED.format("--mem-per-c", "mem_per_cpu",
                                                                            "mem_per_cpu")),
    ("sbatch-ntasks", spec(sbatch=["-n4"]), MODELLED.format("-n", "ntasks", "ntasks")),
    ("sbatch-exclusive", spec(sbatch=["--exclusive"]), MODELLED.format("--exclusive", "exclusive", "exclusive")),
    ("sbatch-constraint", spec(sbatch=["-Cnvlink"]), MODELLED.format("-C", "constraint", "constraint")),
    ("constraint-count", spec(constraint="a*2"), "job.yaml: constraint: constraint 'a*2': '*' at character 2: a "
     "feature count (name*N) is not supported; ask for the nodes with -N and the feature alone"),
    ("override-constraint", spec(overrides={"gpu": {"constraint": "a|"}}), "job.yaml: overrides.gpu.constraint: "
     "constraint 'a|' ends after an operator; name a feature after it"),
    ("nodes-range", spec(nodes="2-4"), "job.yaml: nodes: a node range lets Slurm choose the count when the job "
     "starts, which the policies cannot plan; give one count (--nodes=2 or --nodes=4)"),
    ("nodes-zero", spec(nodes=0), "job.yaml: nodes: expected a whole number from 1 to 100000, like --nodes=2, got 0"),
    ("ntasks-word", spec(ntasks="many"), "job.yaml: ntasks: expected a whole number from 1 to 100000, like "
     "--ntasks=2, got 'many'"),
    ("nodes-over-list", spec(nodes=3, nodelist=["c1", "c2"]), "job.yaml: nodes: 3 with nodelist c1,c2 naming 2 "
     "node(s): slurmx places such a job only on the listed nodes; list 3 nodes, or ask for nodes: 2"),
    ("override-tasks-under-nodes", spec(nodes=2, overrides={"cpu": {"ntasks": 1}}), "job.yaml: overrides.cpu.ntasks: "
     "1 with overrides.cpu.nodes: 2: every node runs at least one task; ask for ntasks: 2 or more, or nodes: 1"),
    ("nodelist-file", spec(nodelist="/etc/hosts"), "job.yaml: nodelist: '/etc/hosts' reads as a file of node names, "
     "which slurmx cannot check; write the names themselves (--nodelist=c1,c2)"),
    ("exclude-bad", spec(exclude="c[1-"), "job.yaml: exclude: expected node names like c1,c2 or c[1-2]: host list "
     "'c[1-' has unbalanced brackets"),
    ("sbatch-array", spec(sbatch=["--array=1-3"]), "job.yaml: sbatch: --array is what the spec's 'array:' says; "
     "write array: instead"),
    ("array-throttle", spec(array="1-3%0"), "job.yaml: %0: a throttle is a count of tasks at once, e.g. 0-9%3"),
    ("dependency-after", spec(dependency="after:5"), "job.yaml: dependency: after is not supported on groups: a losing "
     "variant is cancelled, which satisfies `after` before the group's own variant starts; use afterok or afterany"),
    ("sbatch-wait", spec(sbatch=["--wait"]),
     "job.yaml: sbatch: --wait is an option of the command: give `slurmx submit --wait`"),
    ("sbatch-value-word", spec(sbatch=["--account", "proj"]),
     "job.yaml: sbatch: expected an sbatch option like --account=proj, got 'proj'"),
    ("sbatch-hold", spec(sbatch=["--hold"]), RESERVED.format("--hold")),
    ("sbatch-requeue", spec(sbatch=["--requeue"]), RESERVED.format("--requeue")),
    ("sbatch-signal", spec(sbatch=["--signal=USR1@60"]), MODELLED.format("--signal", "signal", "signal")),
    ("sbatch-wrap", spec(sbatch=["--account=p", "--wrap=x"]), RESERVED.format("--wrap")),
    ("sbatch-short-p", spec(sbatch=["-p"]), MODELLED.format("-p", "variants", "variants")),
    ("sbatch-short-attached", spec(sbatch=["-pgpu"]), MODELLED.format("-p", "variants", "variants")),
    ("sbatch-short-q", spec(sbatch=["-q"]), MODELLED.format("-q", "class", "class")),
    ("sbatch-short-o", spec(sbatch=["-ox"]), MODELLED.format("-o", "output", "output")),
    ("sbatch-not-option", spec(sbatch=["account"]),
     "job.yaml: sbatch: expected an sbatch option like --account=proj, got 'account'"),
    ("override-sbatch", spec(overrides={"gpu": {"sbatch": ["--qos=x"]}}),
     "job.yaml: overrides.gpu.sbatch: --qos is what the spec's 'class:' says; write class: instead"),
    # payload
    ("both", spec(script="echo hi"), "job.yaml: give one of 'command' or 'script', not both"),
    ("neither", {"name": "t"}, "job.yaml: give the payload: 'command' (one line) or 'script' (a body)"),
    # other fields
    ("variants-empty", spec(variants=[]),
     "job.yaml: variants: list at least one resource kind, or leave the key out for all of them"),
    ("modules-space", spec(modules=["a b"]), "job.yaml: modules: expected a module name like cuda/12.2, got 'a b'"),
    ("cpus-zero", spec(cpus=0), "job.yaml: cpus: must be >= 1, got 0"),
    ("cpus-word", spec(cpus="four"), "job.yaml: cpus: expected a whole number, got 'four'"),
    ("args-not-list", spec(args=5), "job.yaml: args: expected a list, got 5"),
    ("top-level-list", [1], "job.yaml: expected a mapping of keys at top level, got list"),  # type: ignore[list-item]
]


@pytest.mark.parametrize(("data", "expected"), [pytest.param(d, e, id=i) for i, d, e in BAD])
def test_bad_spec_fails_with_one_exact_line(data: Any, expected: str) -> None:
    assert error_of(data) == expected


@pytest.mark.parametrize(("field", "value"), [("variants", ["tpu"]), ("variants", "cpu,tpu")])
def test_unknown_resource_kind_names_the_valid_kinds(field: str, value: Any) -> None:
    parsed = parse_spec(spec(**{field: value}), SRC)
    with pytest.raises(ConfigError) as info:
        resolve_variants(parsed, site(), source=SRC)
    assert str(info.value) == UNKNOWN_TPU


def test_unknown_kind_from_the_command_line() -> None:
    with pytest.raises(ConfigError) as info:
        resolve_variants(parse_spec(spec(), SRC), site(), only=("cpu", "tpu"), source=SRC)
    assert str(info.value) == UNKNOWN_TPU


def test_override_of_unknown_kind() -> None:
    parsed = parse_spec(spec(overrides={"tpu": {"cpus": 2}}), SRC)
    with pytest.raises(ConfigError) as info:
        resolve_variants(parsed, site(), source=SRC)
    assert str(info.value) == ("job.yaml: overrides.tpu: the site defines no resource kind 'tpu'; "
                               "valid kinds: cpu, gpu, accel")


def test_estimate_of_unknown_kind() -> None:
    parsed = parse_spec(spec(estimates={"tpu": "1h"}), SRC)
    with pytest.raises(ConfigError) as info:
        resolve_variants(parsed, site(), source=SRC)
    assert str(info.value) == "job.yaml: estimates.tpu: not a resource kind of this site; valid kinds: cpu, gpu, accel"


def test_work_beyond_what_the_tag_carries_is_refused_in_one_line() -> None:
    """work: 1e20 once rendered as n= of 21 digits, which the tag grammar refuses with a traceback at submit."""
    with pytest.raises(ConfigError) as info:
        parse_spec(spec(work=1e20), SRC)
    assert "work" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("zero", ["0d", "0", 0, "0s"])
def test_an_estimate_of_nothing_is_refused_in_one_line(zero: object) -> None:
    """A zero estimate once reached the tag as `e=0`, which the tag grammar refuses: it is refused at the spec."""
    with pytest.raises(ConfigError) as info:
        parse_spec(spec(estimates={"cpu": zero}), SRC)
    assert "estimates" in str(info.value) and "positive duration" in str(info.value)
    assert "\n" not in str(info.value)


# ---------------------------------------------------------------------------------------------- files


@pytest.mark.parametrize(("text", "expected"), [
    ("name: a\nname: b\n", "{p}: line 2, column 1: duplicate key 'name'"),
    ("", "{p}: file is empty; expected keys " + SPEC_KEYS),
    ("- a\n", "{p}: expected a mapping of keys at top level, got list"),
    ("name: t\ncommand: [unclosed\n", "{p}: line 3, column 1: expected ',' or ']', but got '<stream end>'"),
    ("name: t\ncommand: x\ncolour: red\n", "{p}: colour: unknown key; valid keys: " + SPEC_KEYS),
])
def test_load_spec_errors_name_the_file(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_spec(path)
    assert str(info.value) == expected.format(p=path)


def test_missing_spec_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as info:
        load_spec(path)
    assert str(info.value) == f"{path}: file not found; pass the path of a job spec (.yaml) or a batch script"


# ---------------------------------------------------------------------------------------------- known bugs
# Each was a bug in slurmx/submit, found by these tests and fixed; they stay as regression tests.

BUG_INF = ("spec.py _mem/_duration catch only UnitError, but parse_mem/parse_duration raise OverflowError for an "
           "infinite float (YAML `.inf`) or a digit string that overflows float ('999...9s'): a traceback, not a "
           "ConfigError")
BUG_ENV_VALUE = ("spec.py _env str()s every env value the Python way: YAML null -> 'None', [1, 2] -> '[1, 2]', "
                 "{a: 1} -> \"{'a': 1}\" instead of refusing non-scalar values")
BUG_DOLLAR = ("spec.py _NAME_RE/_ENV_RE/_MODULE_RE end in `$`, which also matches before a trailing newline: "
              "name 'abc\\n', env name 'A\\n' (renders `export A` + a line `='v'`), module 'cuda\\n' are accepted")
BUG_ABBREV = ("spec.py _flags compares whole option names, but sbatch's getopt_long takes unambiguous prefixes: "
              "--parti=gpu, --qo=te, --hol, --no-req pass and, emitted after slurmx's own options, win in sbatch")
BUG_NEWLINE_FLAG = ("spec.py _flags sees '--hold\\n' as a name other than '--hold', and render.py _SAFE_OPTION's "
                    "`$` matches before the trailing newline, so a reserved flag reaches an #SBATCH line")


@pytest.mark.parametrize("data", [
    spec(mem=float("inf")), spec(time=float("inf")), spec(grace=float("inf")), spec(estimates={"cpu": float("inf")}),
    spec(time="9" * 400 + "s"), spec(mem="9" * 400 + "G"), spec(overrides={"gpu": {"mem": float("inf")}}),
], ids=["mem-inf", "time-inf", "grace-inf", "estimate-inf", "time-huge-string", "mem-huge-string", "override-mem-inf"])
def test_infinite_quantities_are_config_errors(data: dict[str, Any]) -> None:
    assert error_of(data).startswith("job.yaml: ")


@pytest.mark.parametrize("value", [None, [1, 2], {"a": 1}], ids=["null", "list", "mapping"])
def test_env_value_that_is_not_a_scalar_is_refused(value: Any) -> None:
    assert error_of(spec(env={"A": value})).startswith("job.yaml: env")


@pytest.mark.parametrize("data", [spec(name="abc\n"), spec(env={"A\n": "v"}), spec(modules=["cuda\n"])],
                         ids=["name", "env-name", "module"])
def test_trailing_newline_in_validated_names_is_refused(data: dict[str, Any]) -> None:
    error_of(data)


@pytest.mark.parametrize("flag", ["--parti=gpu", "--qo=te", "--hol", "--no-req"])
def test_abbreviated_reserved_flag_is_refused(flag: str) -> None:
    refused_before_sbatch(spec(sbatch=[flag]))


@pytest.mark.parametrize("flag", ["--hold\n", "--requeue\n", "--partition\n"])
def test_reserved_flag_with_trailing_newline_is_refused(flag: str) -> None:
    refused_before_sbatch(spec(sbatch=[flag]))
