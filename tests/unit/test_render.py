"""Rendering: golden scripts per template and mode, canonical #SBATCH option order, per-variant overrides, and
scripts that bash can parse.

Golden files live in tests/unit/golden/; after an intended template change rewrite them with
`python3 tests/unit/golden/regenerate.py` and review the diff.
"""

from __future__ import annotations

import difflib
import importlib.util
import re
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from slurmx.core.config import SiteConfig, parse_site_config
from slurmx.core.validation import ConfigError
from slurmx.submit.render import RenderedVariant, payload_hash, render_variant, variant_options
from slurmx.submit.spec import JobSpec, parse_spec

GOLDEN_DIR = Path(__file__).resolve().parent / "golden"
REGENERATE = "python3 tests/unit/golden/regenerate.py"
GID = "train-0a1b2c"
MODES = ("managed", "race", "pick")
KINDS = ("cpu", "gpu", "accel")
BASH = shutil.which("bash")


def _load_golden_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("slurmx_golden_regenerate", GOLDEN_DIR / "regenerate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


golden = _load_golden_module()


def site(**submit: Any) -> SiteConfig:
    return parse_site_config({
        "cluster": {"name": "t"},
        "resources": {
            "cpu": {"partition": "cpu", "cpus": 2, "mem": "1G", "extra_flags": ["--constraint=avx2"]},
            "gpu": {"partition": "gpu", "cpus": 1, "mem": "500M", "gres": "gpu:1", "time": "4h"},
            "accel": {"partition": "accel", "cpus": 1, "mem": "500M", "gres": "accel:1"},
        },
        "classes": {"te": {"qos": "interactive"}, "be": {"qos": "scavenger"}},
        "preemption": {"signal": "USR2", "grace": "30s"},
        "submit": {"spool_dir": "/shared/spool", **submit},
    })


def spec(**fields: Any) -> JobSpec:
    return parse_spec({"name": "train", "command": "python3 train.py", **fields}, "job.yaml")


def bash_syntax_error(script: str) -> str | None:
    assert BASH is not None
    result = subprocess.run([BASH, "-n"], input=script, capture_output=True, text=True, timeout=30, check=False)
    return None if result.returncode == 0 else result.stderr


# ---------------------------------------------------------------------------------------------- golden files


@pytest.mark.parametrize(("template", "mode"), golden.cases(), ids=[f"{t}-{m}" for t, m in golden.cases()])
def test_rendered_script_matches_golden_file(template: str, mode: str) -> None:
    path = golden.golden_path(template, mode)
    actual = golden.render_case(template, mode)
    if not path.exists():
        pytest.fail(f"golden file {path.name} is missing; create it with `{REGENERATE}`")
    expected = path.read_text(encoding="utf-8")
    if actual != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(keepends=True), actual.splitlines(keepends=True),
                                            fromfile=f"golden/{path.name}", tofile="rendered now"))
        pytest.fail(f"{template} in {mode} mode differs from golden/{path.name}:\n{diff}\n"
                    f"If the change is intended, regenerate the golden files: `{REGENERATE}`", pytrace=False)


def test_no_stale_golden_files() -> None:
    expected = {golden.golden_path(t, m).name for t, m in golden.cases()}
    present = {p.name for p in GOLDEN_DIR.glob("*.sh")}
    assert present == expected, f"stale or missing golden files; run `{REGENERATE}`"


@pytest.mark.skipif(BASH is None, reason="bash not installed")
@pytest.mark.parametrize(("template", "mode"), golden.cases(), ids=[f"{t}-{m}" for t, m in golden.cases()])
def test_golden_scripts_pass_bash_n(template: str, mode: str) -> None:
    assert bash_syntax_error(golden.golden_path(template, mode).read_text(encoding="utf-8")) is None


def test_rendering_is_byte_stable() -> None:
    assert golden.render_case("gpu", "race") == golden.render_case("gpu", "race")


# ---------------------------------------------------------------------------------------------- the real hooks


@pytest.mark.skipif(BASH is None, reason="bash not installed")
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", [*KINDS, "profile", "sensitivity"])
def test_real_render_embeds_the_hooks_verbatim_and_passes_bash_n(kind: str, mode: str) -> None:
    steps = 5 if kind in ("profile", "sensitivity") else None
    rendered = render_variant(golden.spec(), golden.site(), "cpu" if steps else kind, GID, mode,
                              profile_steps=steps, search=kind == "sensitivity")
    hooks = resources.files("slurmx.hooks")
    assert hooks.joinpath("hook.sh").read_text(encoding="utf-8").rstrip("\n") in rendered.script
    sample_only = {"profile": {"search.py"}, "sensitivity": set()}.get(kind, {"search.py", "sample.py"})
    for entry in hooks.iterdir():
        if entry.name.endswith(".py") and entry.name not in sample_only:
            assert entry.read_text(encoding="utf-8").rstrip("\n") in rendered.script, entry.name
    assert bash_syntax_error(rendered.script) is None


# ---------------------------------------------------------------------------------------------- option order


def option_names(options: tuple[str, ...]) -> list[str]:
    return [option.split("=", 1)[0] for option in options]


def expected_names(kind: str, job_class: str, mode: str, extra: list[str], layout: tuple[str, ...] = ()) \
        -> list[str]:
    names = ["--job-name", "--partition", "--qos", "--cpus-per-task", "--mem"]
    if kind in ("gpu", "accel"):
        names.append("--gres")
    if kind == "gpu":
        names.append("--time")
    names += [*layout, "--output", "--comment"]
    names += ["--signal", "--requeue"] if job_class == "be" else ["--no-requeue"]
    if mode == "managed":
        names.append("--begin")
    return names + extra


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("job_class", ["te", "be"])
@pytest.mark.parametrize("kind", KINDS)
def test_options_come_out_in_canonical_order(kind: str, job_class: str, mode: str) -> None:
    job = spec(**{"class": job_class, "sbatch": ["--account=proj"], "exclusive": True, "nodes": 2, "ntasks": 4})
    options = variant_options(job, site(), kind, GID, mode, "job.yaml")
    extra = (["--constraint"] if kind == "cpu" else []) + ["--account"]
    layout = ("--nodes", "--ntasks", "--exclusive")
    assert option_names(options) == expected_names(kind, job_class, mode, extra, layout)
    rendered = render_variant(job, site(), kind, GID, mode, "job.yaml")
    assert rendered.options == options
    lines = rendered.script.splitlines()
    assert lines[0] == "#!/bin/bash"
    assert lines[1:1 + len(options)] == [f"#SBATCH {option}" for option in options]
    assert not lines[1 + len(options)].startswith("#SBATCH")


def test_option_values() -> None:
    options = variant_options(spec(grace="45s", time="90m"), site(), "gpu", GID, "race", "job.yaml")
    assert options == (
        "--job-name=train@gpu", "--partition=gpu", "--qos=scavenger", "--cpus-per-task=1", "--mem=500M",
        "--gres=gpu:1", "--time=01:30:00", f"--output=/shared/spool/{GID}/gpu-%j.out",
        f"--comment=slurmx:1:g={GID},v=gpu,c=be,gr=45,h={payload_hash(spec(), 'gpu')}", "--signal=B:USR2@45",
        "--requeue",
    )


def test_be_gets_grace_signal_and_requeue_with_site_default_grace() -> None:
    options = variant_options(spec(), site(), "cpu", GID, "race", "job.yaml")
    assert "--signal=B:USR2@30" in options and "--requeue" in options
    assert "--no-requeue" not in options


def test_grace_zero_is_kept() -> None:
    assert "--signal=B:USR2@0" in variant_options(spec(grace=0), site(), "cpu", GID, "race", "job.yaml")


def test_te_gets_no_requeue_and_no_signal() -> None:
    options = variant_options(spec(**{"class": "te"}), site(), "cpu", GID, "managed", "job.yaml")
    assert "--no-requeue" in options and "--qos=interactive" in options
    assert not any(o.startswith(("--signal", "--requeue")) for o in options)


@pytest.mark.parametrize(("mode", "leased"), [("managed", True), ("race", False), ("pick", False)])
def test_only_managed_mode_is_leased(mode: str, leased: bool) -> None:
    """Managed variants wait under a lease (a begin time slurmxd keeps moving), never a hold that outlives it."""
    for kind in KINDS:
        options = variant_options(spec(), site(), kind, GID, mode, "job.yaml")
        assert ("--begin=now+600" in options) is leased
        assert "--hold" not in options
        assert any(o.startswith("--comment=") and o.endswith(",l=600") for o in options) is leased


def test_unsafe_extra_flag_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as info:
        variant_options(spec(sbatch=["--account=a b"]), site(), "cpu", GID, "race", "job.yaml")
    assert str(info.value) == ("job.yaml: sbatch option '--account=a b' holds characters slurmx will not put in an "
                               "#SBATCH line (spaces, quotes, shell metacharacters); simplify the value")


# ---------------------------------------------------------------------------------------------- overrides


def render_all(job: JobSpec, mode: str = "race") -> dict[str, RenderedVariant]:
    return {kind: render_variant(job, site(), kind, GID, mode, "job.yaml") for kind in KINDS}


def section(script: str, start: str, end: str) -> str:
    return script[script.index(start):script.index(end)]


def environment_lines(script: str) -> list[str]:
    """`export`/`module load` lines the template writes from the spec (after the hooks, before the payload)."""
    block = section(script, 'export PYTHONPATH="$SLURMX_SPOOL_DIR/pylib', "# --- the payload, verbatim")
    return [line for line in block.splitlines() if line.startswith(("module load ", "export "))
            and not line.startswith(("export PYTHONPATH=", "export OMP_NUM_THREADS=", "export SLURMX_"))]


def payload_of(script: str) -> str:
    match = re.search(r"cat > \"\$_slurmx_payload\.tmp\.\$\$\" <<'(SLURMX_EOF_\w+)'\n(.*?)\n\1\n", script, re.S)
    assert match is not None
    return match.group(2)


OVERRIDES = {
    "gpu": {"command": "python3 train.py --cuda", "cpus": 4, "mem": "16G", "gres": "gpu:2", "time": "1h",
            "env": {"ONLY_GPU": "yes", "SHARED": "gpu's own"}, "modules": ["cuda/12.2"],
            "sbatch": ["--gpu-bind=closest"]},
}


def test_overrides_land_only_in_their_variant() -> None:
    job = spec(env={"SHARED": "everyone"}, modules=["gcc/12"], overrides=OVERRIDES, sbatch=["--account=proj"])
    out = render_all(job)
    gpu, cpu, accel = out["gpu"], out["cpu"], out["accel"]

    assert {"--cpus-per-task=4", "--mem=16384M", "--gres=gpu:2", "--time=01:00:00", "--gpu-bind=closest",
            "--account=proj"} <= set(gpu.options)
    assert {"--cpus-per-task=2", "--mem=1024M", "--account=proj"} <= set(cpu.options)
    assert {"--cpus-per-task=1", "--mem=500M", "--gres=accel:1"} <= set(accel.options)
    for other in (cpu, accel):
        assert not {"--cpus-per-task=4", "--mem=16384M", "--gres=gpu:2", "--gpu-bind=closest"} & set(other.options)
        assert not any(o.startswith("--time") for o in other.options)

    assert environment_lines(gpu.script) == ["module load gcc/12", "module load cuda/12.2", "export ONLY_GPU=yes",
                                             "export SHARED='gpu'\"'\"'s own'"]
    for other in (cpu, accel):
        assert environment_lines(other.script) == ["module load gcc/12", "export SHARED=everyone"]

    assert payload_of(gpu.script) == "#!/bin/bash\npython3 train.py --cuda"
    assert payload_of(cpu.script) == payload_of(accel.script) == "#!/bin/bash\npython3 train.py"


def test_override_script_replaces_the_command_for_that_variant() -> None:
    out = render_all(spec(overrides={"accel": {"script": "set -e\necho accel\n"}}))
    assert payload_of(out["accel"].script) == "#!/bin/bash\nset -e\necho accel"
    assert payload_of(out["cpu"].script) == "#!/bin/bash\npython3 train.py"


def test_spec_level_resources_apply_to_every_variant() -> None:
    out = render_all(spec(cpus=3, mem="2G", time="10m"))
    for rendered in out.values():
        assert {"--cpus-per-task=3", "--mem=2048M", "--time=00:10:00"} <= set(rendered.options)


def test_variant_without_payload_is_a_config_error() -> None:
    job = parse_spec({"name": "t", "overrides": {"cpu": {"command": "true"}}}, "job.yaml")
    assert payload_of(render_variant(job, site(), "cpu", GID, "race", "job.yaml").script) == "#!/bin/bash\ntrue"
    with pytest.raises(ConfigError) as info:
        render_variant(job, site(), "gpu", GID, "race", "job.yaml")
    assert str(info.value) == ("job.yaml: variant gpu has no payload; set 'command' or 'script' "
                               "(at the top or in overrides.gpu)")


def test_race_block_only_in_race_mode() -> None:
    for mode in MODES:
        script = render_variant(spec(), site(race_settle="3s"), "cpu", GID, mode, "job.yaml").script
        assert ("# --- race mode" in script) is (mode == "race")
        assert ("sleep 3  #" in script) is (mode == "race")


def test_profile_template_exports_the_step_count() -> None:
    script = render_variant(spec(), site(), "gpu", GID, "pick", "job.yaml", profile_steps=7).script
    assert "export SLURMX_PROFILE_STEPS=7\n" in script
    assert "GPU variant" not in script


def test_site_template_folder_wins(tmp_path: Path) -> None:
    (tmp_path / "cpu.sh.j2").write_text('{% extends "_base.sh.j2" %}\n{% block kind_setup %}\n# site cpu\n'
                                        "{% endblock %}\n")
    script = render_variant(spec(), site(templates_dir=str(tmp_path)), "cpu", GID, "race", "job.yaml").script
    assert "# site cpu\n" in script and "CPU variant" not in script


def test_template_error_is_one_line_config_error(tmp_path: Path) -> None:
    (tmp_path / "cpu.sh.j2").write_text("#!/bin/bash\n{{ no_such_variable }}\n")
    with pytest.raises(ConfigError) as info:
        render_variant(spec(), site(templates_dir=str(tmp_path)), "cpu", GID, "race", "job.yaml")
    assert str(info.value) == "template cpu.sh.j2: 'no_such_variable' is undefined"


@pytest.mark.skipif(BASH is None, reason="bash not installed")
@pytest.mark.parametrize("mode", MODES)
def test_rendered_scripts_with_hostile_values_pass_bash_n(mode: str) -> None:
    hostile = "a'b\"c$(d)`e`;f&g|h<i>j\\k\nl $HOME ${X:-y} !m #n *"
    job = spec(args=[hostile, "", "-x"], env={"V": hostile}, checkpoint_dir=hostile, workdir=hostile,
               modules=["gcc/12"], overrides={"gpu": {"script": f"#!/bin/sh\necho {hostile}\n"}})
    for rendered in render_all(job, mode).values():
        assert bash_syntax_error(rendered.script) is None


def test_a_template_the_site_names_but_does_not_have_is_refused_not_replaced(tmp_path: Path) -> None:
    base = site(templates_dir=str(tmp_path))
    named = base.model_copy(update={"resources": {**base.resources, "cpu": base.resources["cpu"].model_copy(
        update={"template": "fpga.sh.j2"})}})
    with pytest.raises(ConfigError, match=r"resources.cpu.template: 'fpga.sh.j2' does not exist in "):
        render_variant(spec(), named, "cpu", GID, "race", "job.yaml")
    # A kind without a template of its own (none named, no <kind>.sh.j2) still renders with the base template.
    assert "#!/bin/bash" in render_variant(spec(), base, "cpu", GID, "race", "job.yaml").script


def test_each_script_embeds_the_bash_hook_once_and_sample_modules_only_in_samples() -> None:
    """slurmctld stores every job's script: an ordinary variant carries hook.sh once and no sample-only module."""
    variant = render_variant(spec(), site(), "cpu", GID, "managed", "job.yaml").script
    sample = render_variant(spec(), site(), "cpu", GID, "pick", "job.yaml", profile_steps=3).script
    search = render_variant(spec(), site(), "cpu", GID, "pick", "job.yaml", profile_steps=3, search=True).script
    assert variant.count("slurmx_run() {") == 1
    assert "/sample.py" not in variant and "/search.py" not in variant
    assert "/sample.py" in sample and "/search.py" not in sample
    assert "/sample.py" in search and "/search.py" in search and "python3 -m slurmx.hooks.search" in search


def test_a_pythonpath_in_env_keeps_the_hooks_importable(tmp_path: Path) -> None:
    """`env: {PYTHONPATH: ...}` is the user's code; the job's own `slurmx.hooks` (in the group folder's pylib) must
    stay on the path, or every Python payload using the hooks fails with ModuleNotFoundError."""
    job = parse_spec({"name": "j", "command": "true", "env": {"PYTHONPATH": "/shared/code"}})
    script = render_variant(job, site(), "cpu", GID, "race", "job.yaml").script
    block = section(script, 'export PYTHONPATH="$SLURMX_SPOOL_DIR/pylib', "# --- the payload, verbatim")
    exports = [line for line in block.splitlines() if line.startswith("export PYTHONPATH=")]
    shown = subprocess.run(["bash", "-c", "\n".join([*exports, 'echo "$PYTHONPATH"'])], capture_output=True,
                           text=True, check=True, env={"SLURMX_SPOOL_DIR": str(tmp_path)}).stdout.strip()
    assert shown == f"{tmp_path}/pylib:/shared/code"
