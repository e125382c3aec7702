"""`slurmx config check` and `config schema`: every problem slurmxd or the cluster would hit, one line each.

Each case is one of issue 19's: a file `config check` called ok and slurmxd or `slurmx submit` then refused or
silently changed (unknown policy or parameters, one QOS for both classes, a missing template), or a message that
named the wrong thing (`mem: 512K`, a typo reported as the real key missing).
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from slurmx.cli import app
from slurmx.core.config import ConfigError, load_site_config, parse_site_config
from slurmx.core.validation import validate_model
from slurmx.daemon.site_check import (
    check_site_data,
    check_site_file,
    load_checked_site,
    site_json_schema,
    template_environment,
)
from slurmx.policies import make_policy
from slurmx.profile.sampling import SamplingParams
from slurmx.sim.sweep import expand_grid
from tests.unit.test_input_properties import BOUNDED, VALUES, _at, _paths, _replaced

REPO = Path(__file__).resolve().parents[2]
SITE: dict[str, Any] = {
    "cluster": {"name": "t"},
    "resources": {
        "cpu": {"partition": "cpu", "cpus": 1, "mem": "500M"},
        "gpu": {"partition": "gpu", "cpus": 1, "mem": "500M", "gres": "gpu:1", "template": "gpu.sh.j2"},
    },
    "policy": {"name": "allox", "params": {"alpha": 0.1}},
    "profile": {"sampling": {"qos": "slurmx-profile", "max_samples": 4}, "off_for": ["fifo"]},
}
POLICIES = "available: accel_batch, allox, "


def _site(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(SITE)
    for dotted, value in changes.items():
        node = data
        *parents, last = dotted.split("__")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return data


def _problems(data: dict[str, Any]) -> list[str]:
    return check_site_data(data, "site.yaml")


def _write(folder: Path, data: Any, name: str = "site.yaml") -> Path:
    path = folder / name
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_base_and_the_example_sites_pass() -> None:
    assert _problems(SITE) == []
    assert check_site_file(REPO / "site-config" / "test-cluster.yaml")[1] == []
    # The README says to start from it: it passes as shipped (its own templates folder is a comment).
    assert check_site_file(REPO / "site-config" / "three-partitions.yaml")[1] == []


@pytest.mark.parametrize(("version", "warned"), [("24.11", ""), ("22.05", ""), ("26.05", ""),
                                                 ("23.11", "lies between the releases slurmx is tested on"),
                                                 ("25.05", "lies between the releases slurmx is tested on"),
                                                 ("27.05", "is newer than any release slurmx knows")])
def test_config_check_warns_of_an_untested_slurm_release_without_refusing_it(version: str, warned: str,
                                                                              tmp_path: Path) -> None:
    path = _write(tmp_path, {**SITE, "cluster": {"name": "t", "slurm_version": version}})
    result = CliRunner().invoke(app.cli, ["config", "check", str(path)])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines[0].startswith(f"{path}: ok (")
    assert len(lines) == (2 if warned else 1)
    assert not warned or lines[1].startswith(f"{path}: cluster.slurm_version: warning: Slurm {version} {warned}")


@pytest.mark.parametrize("version", ["24.13", "27.5", "2024.11", "21.08"])
def test_config_check_refuses_a_slurm_version_that_is_no_release_it_reads(version: str, tmp_path: Path) -> None:
    path = _write(tmp_path, {**SITE, "cluster": {"name": "t", "slurm_version": version}})
    result = CliRunner().invoke(app.cli, ["config", "check", str(path)])
    assert result.exit_code == 1 and result.output.startswith(f"{path}: cluster.slurm_version: ")


# ---- what the daemon would refuse --------------------------------------------------------------------------


def test_an_unknown_policy_is_named_with_the_closest_one() -> None:
    [line] = _problems(_site(policy={"name": "alox"}))
    assert line.startswith("site.yaml: policy.name: unknown policy 'alox'; did you mean allox? " + POLICIES)


def test_unknown_and_mistyped_policy_parameters_are_each_a_line() -> None:
    lines = _problems(_site(policy__params={"alpah": 0.1, "n_max": "many"}))
    assert len(lines) == 2
    assert lines[0].startswith("site.yaml: policy.params.n_max: ")
    assert lines[1].startswith("site.yaml: policy.params.alpah: unknown key; did you mean alpha? valid keys: ")


def test_profile_sampling_is_checked_against_sampling_params() -> None:
    lines = _problems(_site(profile={"sampling": {"overhead_budget": 2, "max_sample": 3}}))
    assert lines == [
        "site.yaml: profile.sampling.overhead_budget: must be < 1.0, got 2",
        "site.yaml: profile.sampling.max_sample: unknown key; did you mean max_samples? valid keys: "
        "overhead_budget, long_to_short, zero_step_short, min_steps, cut_factor, qos, max_samples, max_cpus, "
        "max_gres, time_limit_factor, default_time_limit_s, search_steps, search_cpus"]


def test_profile_off_for_names_policies() -> None:
    [line] = _problems(_site(profile={"off_for": ["fifo", "fitgp"]}))
    assert line.startswith("site.yaml: profile.off_for[1]: unknown policy 'fitgp'; " + POLICIES)


def test_te_and_be_on_one_qos_is_refused_everywhere() -> None:
    data = _site(classes={"te": {"qos": "normal"}, "be": {"qos": "normal"}})
    expected = ("site.yaml: classes: te and be both use QOS 'normal'; give each class its own QOS (slurmxd tells "
                "the classes apart by it)")
    assert _problems(data) == [expected]
    with pytest.raises(ConfigError, match="both use QOS 'normal'"):  # `slurmx submit` loads sites this way
        parse_site_config(data, "site.yaml")


def test_samples_on_a_class_qos_are_refused() -> None:
    [line] = _problems(_site(profile={"sampling": {"qos": "be"}}))
    assert line == ("site.yaml: profile.sampling.qos: 'be' is the be class's QOS; give samples a QOS of their own "
                    "(e.g. slurmx-profile), or samples count as jobs")


# ---- templates -------------------------------------------------------------------------------------------


def test_a_named_template_that_does_not_exist_is_refused() -> None:
    data = _site()
    data["resources"]["gpu"]["template"] = "gpu-a100.sh.j2"
    [line] = _problems(data)
    assert line == ("site.yaml: resources.gpu.template: no template 'gpu-a100.sh.j2' in slurmx's own templates "
                    "(accel.sh.j2, cpu.sh.j2, gpu.sh.j2, profile.sh.j2, sensitivity.sh.j2); fix the name, add the "
                    "file, or remove the key for the base template")


def test_a_kind_without_its_own_template_uses_the_base_one() -> None:
    data = _site()
    data["resources"]["tpu"] = {"partition": "tpu", "cpus": 1, "mem": "1G"}
    assert _problems(data) == []


def test_templates_are_found_in_the_site_directory_and_compiled(tmp_path: Path) -> None:
    (tmp_path / "a100.sh.j2").write_text("#!/bin/bash\n{{ payload }}\n")
    (tmp_path / "broken.sh.j2").write_text("{% if x %}\n")
    data = _site(submit={"templates_dir": str(tmp_path)})
    data["resources"]["gpu"]["template"] = "a100.sh.j2"
    assert _problems(data) == []
    data["resources"]["cpu"]["template"] = "broken.sh.j2"
    [line] = _problems(data)
    assert line == ("site.yaml: resources.cpu.template: broken.sh.j2 line 1: Unexpected end of template; fix the "
                    "template")


def test_a_site_s_own_base_or_profile_template_must_compile(tmp_path: Path) -> None:
    (tmp_path / "profile.sh.j2").write_text("{{ payload }\n")
    [line] = _problems(_site(submit={"templates_dir": str(tmp_path)}))
    assert line.startswith("site.yaml: submit.templates_dir: profile.sh.j2 line 1: ")
    assert line.endswith("; fix the template")


def test_templates_compile_here_with_the_filters_submit_renders_them_with() -> None:
    from slurmx.submit.render import _environment

    assert set(_environment(None).filters) == set(template_environment([]).filters)


def test_a_missing_templates_dir_is_refused(tmp_path: Path) -> None:
    [line] = _problems(_site(submit={"templates_dir": str(tmp_path / "nope")}))
    assert line == f"site.yaml: submit.templates_dir: no directory '{tmp_path / 'nope'}'; create it or remove the key"
    [line] = _problems(_site(submit={"templates_dir": "no/such/dir"}))
    assert line == (f"site.yaml: submit.templates_dir: no directory 'no/such/dir' (relative to {Path.cwd()}); create "
                    "it or remove the key")


# ---- messages that named the wrong thing ------------------------------------------------------------------


@pytest.mark.parametrize("mem", ["512K", "0.4M", "1K"])
def test_a_size_below_one_mib_says_so(mem: str) -> None:
    data = _site()
    data["resources"]["cpu"]["mem"] = mem
    assert _problems(data) == [f"site.yaml: resources.cpu.mem: {mem!r} is below 1 MiB, the smallest amount Slurm "
                               "requests; write e.g. 1M"]
    assert _problems(_site(sweep={"mem": mem})) == [
        f"site.yaml: sweep.mem: {mem!r} is below 1 MiB, the smallest amount Slurm requests; write e.g. 1M"]


def test_a_zero_size_keeps_the_bound_message() -> None:
    data = _site()
    data["resources"]["cpu"]["mem"] = "0M"
    assert _problems(data) == ["site.yaml: resources.cpu.mem: must be >= 1, got 0"]


def test_a_typo_is_reported_as_the_typo_not_as_the_real_key_missing() -> None:
    data = _site()
    data["resources"]["cpu"]["partiton"] = data["resources"]["cpu"].pop("partition")
    assert _problems(data) == [
        "site.yaml: resources.cpu.partiton: unknown key; did you mean partition? valid keys: partition, cpus, mem, "
        "gres, template, extra_flags, time"]


@pytest.mark.parametrize(("sweep", "message"), [
    ({"python": " "}, "python: expected the command that runs Python on the nodes, e.g. python3 or /opt/py/bin/python"),
    ({"pythonpath": ["deps"]}, "pythonpath: expected absolute directories seen by every node, one per entry (no "
     "':'), got 'deps'"),
    ({"pythonpath": ["/a:/b"]}, "pythonpath: expected absolute directories seen by every node, one per entry (no "
     "':'), got '/a:/b'"),
    ({"partition": "cpu,gpu"}, "partition: expected a single partition name (or no key for Slurm's default), got "
     "'cpu,gpu'"),
])
def test_the_sweep_section_refuses_what_its_job_array_would_trip_on(sweep: dict[str, Any], message: str) -> None:
    assert _problems(_site(sweep=sweep)) == [f"site.yaml: sweep.{message}"]


def test_a_sweep_param_misspelling_a_run_config_key_is_not_a_workload_param() -> None:
    base = {"seed": 1, "cluster": {"partitions": [{"name": "gpu", "nodes": 2, "cpus": 8, "mem": "64G",
                                                   "gres": "gpu:4"}]},
            "policy": {"name": "fifo"}, "workload": {"generator": "fitgpp", "params": {"n_jobs": 10}}}
    with pytest.raises(ConfigError) as info:
        expand_grid(base, [("polcy", ["fifo"])])
    assert str(info.value) == ("--param polcy: not a run config key; did you mean policy? (a bare key is a workload "
                               "parameter: write workload.params.polcy to mean that)")
    with pytest.raises(ConfigError, match=r"^--param n_job: neither a run config key nor a parameter of workload "
                                          r"fitgpp; did you mean n_jobs\? its parameters: placement, n_jobs, "):
        expand_grid(base, [("n_job", [5])])
    assert expand_grid(base, [("n_jobs", [5])])[0].document["workload"]["params"] == {"n_jobs": 5}


# ---- all problems, several files, the command --------------------------------------------------------------


BROKEN = _site(classes={"te": {"qos": "x"}, "be": {"qos": "x"}}, policy={"name": "fifi"},
               profile={"sampling": {"overhed_budget": 0.1}})
BROKEN["resources"]["cpu"]["mem"] = "512K"
BROKEN["resources"]["gpu"]["template"] = "nope.sh.j2"


def test_every_problem_of_a_file_in_one_run(tmp_path: Path) -> None:
    path = _write(tmp_path, BROKEN)
    site, lines = check_site_file(path)
    assert site is None
    assert [line.split(": ")[1] for line in lines] == [
        "resources.cpu.mem", "classes", "policy.name", "profile.sampling.overhed_budget", "resources.gpu.template"]
    assert all(line.startswith(f"{path}: ") and "\n" not in line for line in lines)
    with pytest.raises(ConfigError) as info:
        load_checked_site(path)
    assert info.value.errors[1:] == lines[1:]
    assert str(info.value) == f"{lines[0]} (and 4 more: `slurmx config check {path}` lists all)"


def test_config_check_takes_several_files_and_fails_if_any_has_a_problem(tmp_path: Path) -> None:
    good, bad = _write(tmp_path, SITE, "good.yaml"), _write(tmp_path, BROKEN, "bad.yaml")
    result = CliRunner().invoke(app.cli, ["config", "check", str(good), str(bad), str(tmp_path / "none.yaml")])
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[0] == f"{good}: ok (2 resource kinds: cpu, gpu; policy allox; transport local)"
    assert sum(line.startswith(f"{bad}: ") for line in lines) == 5
    assert f"{tmp_path / 'none.yaml'}: file not found; pass --site PATH or set SLURMX_SITE" in lines
    assert "Traceback" not in result.output
    assert CliRunner().invoke(app.cli, ["config", "check", str(good), str(good)]).exit_code == 0


def test_config_check_without_a_file_checks_the_site_slurmx_uses(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    good = _write(tmp_path, SITE, "good.yaml")
    result = CliRunner().invoke(app.cli, ["--site", str(good), "config", "check"])
    assert result.exit_code == 0 and result.output.startswith(f"{good}: ok (")
    monkeypatch.setenv("SLURMX_SITE", str(tmp_path / "none.yaml"))
    result = CliRunner().invoke(app.cli, ["config", "check"])
    assert result.exit_code == 1
    assert result.output.splitlines()[0] == f"{tmp_path / 'none.yaml'}: file not found; pass --site PATH or set " \
        "SLURMX_SITE"


def test_config_check_exits_non_zero_with_a_count_through_the_real_entry(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, BROKEN)
    with pytest.raises(SystemExit) as info:
        _main(["config", "check", str(path)])
    assert info.value.code == 1
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == "slurmx: 1 of 1 file(s) have problems; fix each line above"
    assert len(err) == 6


def _main(argv: list[str]) -> None:
    """`slurmx ARGV` through the real entry point, which turns expected failures into one line and exit 1."""
    saved = sys.argv
    sys.argv = ["slurmx", *argv]
    try:
        app.main()
    finally:
        sys.argv = saved


def test_slurmxd_refuses_what_config_check_refuses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[Any] = []
    monkeypatch.setattr("slurmx.daemon.main.run_daemon", lambda site, **kw: ran.append(site))
    bad = _write(tmp_path, _site(policy={"name": "fifi"}))
    result = CliRunner().invoke(app._daemon, ["--site", str(bad), "--once"])
    assert result.exit_code == 1 and not ran
    assert isinstance(result.exception, ConfigError)
    assert str(result.exception).startswith(f"{bad}: policy.name: unknown policy 'fifi'; did you mean fifo?")
    good = _write(tmp_path, SITE, "good.yaml")
    assert CliRunner().invoke(app._daemon, ["--site", str(good), "--once"]).exit_code == 0 and len(ran) == 1


# ---- the schema ------------------------------------------------------------------------------------------


def test_config_schema_is_json_schema_of_the_site_file() -> None:
    result = CliRunner().invoke(app.cli, ["config", "schema"])
    assert result.exit_code == 0
    schema = json.loads(result.output)
    assert schema == site_json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["required"] == ["cluster", "resources"] and schema["additionalProperties"] is False
    assert list(schema["properties"]) == ["cluster", "resources", "classes", "policy", "preemption", "daemon",
                                          "submit", "sweep", "profile", "transport"]
    kind = schema["$defs"]["ResourceKindConfig"]["properties"]
    assert {"type": "string", "description": "a memory size like 500M or 32G (a bare number: MiB)"} in \
        kind["mem"]["anyOf"]
    assert any(option.get("type") == "string" for option in kind["time"]["anyOf"])
    assert "mem_mb" not in kind and "time_s" not in kind
    sampling = schema["$defs"]["ProfileConfig"]["properties"]["sampling"]
    assert "overhead_budget" in sampling["properties"] and sampling["additionalProperties"] is False
    policy = schema["$defs"]["PolicyConfig"]
    assert "fifo" in policy["properties"]["name"]["enum"]
    allox = next(b for b in policy["allOf"] if b["if"]["properties"]["name"]["const"] == "allox")
    assert "alpha" in allox["then"]["properties"]["params"]["properties"]
    refs = set(_refs(schema))
    assert refs <= {f"#/$defs/{name}" for name in schema["$defs"]}, refs - {f"#/$defs/{n}" for n in schema["$defs"]}


def test_nested_models_of_the_same_name_and_another_shape_are_kept_apart() -> None:
    from pydantic import BaseModel

    from slurmx.daemon.site_check import _hoisted

    def args(field: str) -> type[BaseModel]:
        inner = type("Inner", (BaseModel,), {"__annotations__": {field: int}})
        return type(f"Args{field}", (BaseModel,), {"__annotations__": {"inner": inner}})

    defs: dict[str, Any] = {}
    first, second = _hoisted(args("a"), defs), _hoisted(args("b"), defs)
    assert first["properties"]["inner"]["$ref"] == "#/$defs/Inner"
    assert second["properties"]["inner"]["$ref"] == "#/$defs/Argsb.Inner"
    assert set(defs["Inner"]["properties"]) == {"a"} and set(defs["Argsb.Inner"]["properties"]) == {"b"}


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        own = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return own + [r for value in node.values() for r in _refs(value)]
    if isinstance(node, list):
        return [r for value in node for r in _refs(value)]
    return []


# ---- property: generated broken sites ----------------------------------------------------------------------


@st.composite
def broken_sites(draw: st.DrawFn, base: dict[str, Any]) -> bytes:
    """The base site with one to four values replaced or keys added, anywhere, policy params and sampling too."""
    doc: Any = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(list(_paths(doc))[1:]))
        if isinstance(_at(doc, path), dict) and draw(st.booleans()):
            path = (*path, draw(st.sampled_from(["name", "params", "template", "qos", "sampling", "off_for", "te",
                                                 "templates_dir", "alpha", "polcy"]) | st.text(max_size=8)))
        value = draw(VALUES | st.sampled_from(["fifi", "nope.sh.j2", "te", "be", "/nonexistent", "512K"]))
        doc = _replaced(doc, path, value)
    return yaml.safe_dump(doc, allow_unicode=True).encode()


def test_generated_broken_sites_give_one_line_problems_and_what_passes_the_daemon_accepts(tmp_path: Path) -> None:
    path = tmp_path / "site.yaml"
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "a100.sh.j2").write_text("#!/bin/bash\n{{ payload }}\n")
    base = _site(submit={"templates_dir": str(tmp_path / "templates")})
    base["resources"]["gpu"]["template"] = "a100.sh.j2"
    assert _problems(base) == []

    @settings(BOUNDED, max_examples=400)
    @given(data=broken_sites(base))
    def check(data: bytes) -> None:
        path.write_bytes(data)
        site, problems = check_site_file(path)  # never raises
        assert (site is None) == bool(problems)
        assert all(line.startswith(f"{path}: ") and "\n" not in line for line in problems), problems
        try:
            load_checked_site(path)
        except ConfigError as exc:
            assert exc.errors[1:] == problems[1:] and "\n" not in str(exc)
        if site is not None:  # what config check accepts, slurmxd and `slurmx submit` accept
            assert load_site_config(path) == site
            make_policy(site.policy.name, site.policy.params)
            validate_model(SamplingParams, site.profile.sampling, "site profile.sampling")

    check()
