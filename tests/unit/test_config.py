"""Site config: the example files load, and each mistake yields one exact, one-line message."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from slurmx.core.config import ConfigError, SiteConfig, load_site_config, parse_site_config
from slurmx.core.model import JobClass
from slurmx.core.resources import Resources

SITE_DIR = Path(__file__).resolve().parents[2] / "site-config"
KIND_KEYS = "partition, cpus, mem, gres, template, extra_flags, time"

MINIMAL: dict[str, Any] = {
    "cluster": {"name": "t"},
    "resources": {
        "cpu": {"partition": "cpu", "cpus": 1, "mem": "500M"},
        "gpu": {"partition": "gpu", "cpus": 1, "mem": "500M", "gres": "gpu:1"},
    },
}


def _with(**sections: Any) -> dict[str, Any]:
    data = copy.deepcopy(MINIMAL)
    data.update(copy.deepcopy(sections))
    return data


def _error(data: Any) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse_site_config(data, "site.yaml")
    return info.value


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "site.yaml"
    path.write_text(text)
    return path


# ---- the example files -------------------------------------------------------------------------------


def test_test_cluster_example() -> None:
    cfg = load_site_config(SITE_DIR / "test-cluster.yaml")
    assert cfg.kind_names() == ("cpu", "gpu", "accel")
    assert cfg.resources_for("cpu") == Resources(1, 500)
    assert cfg.resources_for("gpu") == Resources(1, 500, {"gpu": 1})
    assert cfg.resources_for("accel") == Resources(1, 500, {"accel": 1})
    assert {cfg.kind(k).partition for k in cfg.kind_names()} == {"cpu", "gpu", "accel"}
    assert cfg.policy.name == "fifo"
    assert cfg.transport.kind == "docker"
    assert cfg.transport.container == "slurmx-2411-login"
    assert cfg.transport.docker_user == "alice"
    assert cfg.kind("gpu").template == "gpu.sh.j2"


def test_three_partitions_example() -> None:
    cfg = load_site_config(SITE_DIR / "three-partitions.yaml")
    assert cfg.kind("cpu").partition == "compute"
    assert cfg.resources_for("cpu") == Resources(32, 128 * 1024)
    assert cfg.resources_for("gpu") == Resources(8, 64 * 1024, {"gpu": 1})
    assert cfg.kind("accel").partition == "fpga"
    assert cfg.resources_for("accel").gres == {"fpga": 1}
    assert cfg.kind("cpu").time_s == 86400
    assert cfg.kind("gpu").extra_flags == ("--constraint=a100",)
    assert cfg.policy.name == "allox" and cfg.policy.params == {"alpha": 0.1}
    assert cfg.transport.kind == "ssh" and cfg.transport.host == "login.example.org"
    assert cfg.transport.known_hosts == "~/.ssh/known_hosts"
    assert cfg.cluster.slurm_version == "24.11"


# ---- defaults and helpers ----------------------------------------------------------------------------


def test_defaults() -> None:
    cfg = parse_site_config(MINIMAL)
    assert cfg.qos_for(JobClass.TE) == "te" and cfg.qos_for("be") == "be"
    assert cfg.policy.name == "fifo" and cfg.policy.params == {}
    p = cfg.preemption
    assert (p.signal, p.grace_s, p.max_per_job) == ("USR2", 120, 3)
    assert (p.requeue_exit_code, p.mode) == (99, "requeue")
    assert cfg.daemon.interval_s == 5 and cfg.daemon.start_timeout_s == 120
    assert str(cfg.daemon.state_dir) == "/var/lib/slurmx" and cfg.daemon.socket is None
    assert cfg.submit.mode == "managed" and cfg.submit.templates_dir is None
    t = cfg.transport
    assert (t.kind, t.port, t.implementation) == ("local", 22, "cli")
    assert (t.timeout_s, t.retries, t.backoff_s) == (30, 5, 1)
    assert cfg.kind("cpu").template == "cpu.sh.j2"
    assert cfg.kind("cpu").extra_flags == ()
    assert cfg.kind("cpu").time_s is None


def test_units_are_parsed() -> None:
    cfg = parse_site_config(
        _with(
            preemption={"grace": "2m", "signal": "SIGTERM"},
            daemon={"interval": "1:30", "start_timeout": 45},
            transport={"kind": "local", "timeout": "1m", "backoff": "2s"},
        )
    )
    assert cfg.preemption.grace_s == 120 and cfg.preemption.signal == "TERM"
    assert cfg.daemon.interval_s == 90 and cfg.daemon.start_timeout_s == 45
    assert cfg.transport.timeout_s == 60 and cfg.transport.backoff_s == 2


def test_yaml_numbers() -> None:
    # Unquoted 24.11 is a float in YAML; 1:30 is sexagesimal 90 in YAML 1.1.
    data = yaml.safe_load("cluster: {name: t, slurm_version: 24.11}\ndaemon: {interval: 1:30}\n")
    cfg = parse_site_config({**MINIMAL, **data})
    assert cfg.cluster.slurm_version == "24.11"
    assert cfg.daemon.interval_s == 90


def test_frozen() -> None:
    cfg = parse_site_config(MINIMAL)
    with pytest.raises(ValueError):
        cfg.policy = cfg.policy  # type: ignore[misc]
    with pytest.raises(ValueError):
        cfg.kind("cpu").cpus = 3  # type: ignore[misc]


def test_unknown_kind() -> None:
    with pytest.raises(KeyError, match="site defines: cpu, gpu"):
        parse_site_config(MINIMAL).kind("fpga")


def test_kind_order_is_file_order() -> None:
    data = _with()
    data["resources"] = {"gpu": data["resources"]["gpu"], "cpu": data["resources"]["cpu"]}
    assert parse_site_config(data).kind_names() == ("gpu", "cpu")


def test_type_is_site_config() -> None:
    assert isinstance(parse_site_config(MINIMAL), SiteConfig)


# ---- exact one-line errors ---------------------------------------------------------------------------


def test_unknown_key_lists_valid_keys() -> None:
    data = _with()
    data["resources"]["gpu"]["partiton"] = "gpu"
    assert str(_error(data)) == (f"site.yaml: resources.gpu.partiton: unknown key; did you mean partition? "
                                 f"valid keys: {KIND_KEYS}")
    data["resources"]["gpu"]["colour"] = "red"
    assert _error(data).errors[1] == f"site.yaml: resources.gpu.colour: unknown key; valid keys: {KIND_KEYS}"


def test_unknown_top_level_key() -> None:
    err = _error(_with(polcy={}))
    assert str(err) == (
        "site.yaml: polcy: unknown key; did you mean policy? valid keys: "
        "cluster, resources, classes, policy, preemption, daemon, submit, sweep, profile, transport"
    )


def test_internal_field_name_is_not_a_key() -> None:
    data = _with()
    data["resources"]["cpu"]["mem_mb"] = 500
    assert str(_error(data)).startswith("site.yaml: resources.cpu.mem_mb: unknown key; valid keys: partition")


def test_unknown_nested_keys() -> None:
    assert str(_error(_with(classes={"te": {"qos": "te", "prio": 1}}))) == (
        "site.yaml: classes.te.prio: unknown key; valid keys: qos"
    )
    assert str(_error(_with(transport={"kind": "local", "hostname": "x"}))).startswith(
        "site.yaml: transport.hostname: unknown key; valid keys: kind, host, port, user, known_hosts"
    )


def test_bad_gres() -> None:
    data = _with()
    data["resources"]["gpu"]["gres"] = "gpu2"
    assert str(_error(data)) == "site.yaml: resources.gpu.gres: expected NAME:COUNT, got 'gpu2'"
    data["resources"]["gpu"]["gres"] = "gpu:1,fpga"
    assert str(_error(data)) == "site.yaml: resources.gpu.gres: expected NAME:COUNT, got 'fpga'"


def test_gres_accepts_type_and_lists() -> None:
    data = _with()
    data["resources"]["gpu"]["gres"] = "gpu:a100:1, fpga:1"
    cfg = parse_site_config(data)
    assert cfg.kind("gpu").gres == "gpu:a100:1,fpga:1"
    assert cfg.resources_for("gpu").gres == {"gpu": 1, "fpga": 1}


def test_bad_duration() -> None:
    err = _error(_with(preemption={"grace": "2 weeks"}))
    expected = "expected a duration like 90s, 5m or 2-00:00:00, got '2 weeks'"
    assert str(err) == f"site.yaml: preemption.grace: {expected}"


def test_bad_memory() -> None:
    data = _with()
    data["resources"]["cpu"]["mem"] = "lots"
    expected = "expected a memory size like 32G or 1500M, got 'lots'"
    assert str(_error(data)) == f"site.yaml: resources.cpu.mem: {expected}"


@pytest.mark.parametrize(
    ("signal", "message"),
    [
        ("FOO", "unknown signal 'FOO'; expected a name like USR2 or TERM"),
        ("SIGKILL", "SIGKILL cannot be caught, so jobs get no grace; use e.g. USR2 or TERM"),
        ("stop", "SIGSTOP cannot be caught, so jobs get no grace; use e.g. USR2 or TERM"),
        (12, "expected a signal name like USR2, got 12"),
    ],
)
def test_bad_signal(signal: Any, message: str) -> None:
    assert str(_error(_with(preemption={"signal": signal}))) == f"site.yaml: preemption.signal: {message}"


@pytest.mark.parametrize("spelling", ["USR2", "SIGUSR2", "usr2", "sigusr2"])
def test_signal_normalised(spelling: str) -> None:
    assert parse_site_config(_with(preemption={"signal": spelling})).preemption.signal == "USR2"


def test_ssh_requires_host() -> None:
    err = _error(_with(transport={"kind": "ssh"}))
    assert str(err) == "site.yaml: transport.host: required when transport kind is 'ssh'"


def test_docker_requires_container() -> None:
    err = _error(_with(transport={"kind": "docker"}))
    assert str(err) == "site.yaml: transport.container: required when transport kind is 'docker'"


def test_literal_choices() -> None:
    assert str(_error(_with(transport={"kind": "telnet"}))) == (
        "site.yaml: transport.kind: expected 'local', 'ssh' or 'docker', got 'telnet'"
    )
    assert str(_error(_with(submit={"mode": "fastest"}))) == (
        "site.yaml: submit.mode: expected 'managed', 'race' or 'pick', got 'fastest'"
    )


@pytest.mark.parametrize("partition", ["", "  ", "cpu,gpu"])
def test_bad_partition(partition: str) -> None:
    data = _with()
    data["resources"]["cpu"]["partition"] = partition
    assert str(_error(data)) == (
        f"site.yaml: resources.cpu.partition: expected a single partition name, got {partition!r}"
    )


def test_missing_keys() -> None:
    assert str(_error({"resources": MINIMAL["resources"]})) == "site.yaml: cluster: required key is missing"
    data = _with()
    del data["resources"]["cpu"]["partition"]
    assert str(_error(data)) == "site.yaml: resources.cpu.partition: required key is missing"


def test_bad_kind_names() -> None:
    assert str(_error(_with(resources={}))).startswith(
        "site.yaml: resources: at least one resource kind is required"
    )
    data = _with()
    data["resources"]["GPU"] = data["resources"].pop("gpu")
    assert str(_error(data)) == (
        "site.yaml: resources: invalid kind name 'GPU'; expected lower-case like cpu or gpu_a100"
    )


def test_reserved_extra_flags() -> None:
    data = _with()
    data["resources"]["cpu"]["extra_flags"] = ["--partition=other"]
    assert str(_error(data)) == (
        "site.yaml: resources.cpu.extra_flags: "
        "--partition is set by slurmx from the kind and class; remove it"
    )
    data["resources"]["cpu"]["extra_flags"] = "--exclusive"
    assert str(_error(data)) == "site.yaml: resources.cpu.extra_flags: expected a list, got '--exclusive'"


def test_numbers_and_bounds() -> None:
    data = _with()
    data["resources"]["cpu"]["cpus"] = 0
    assert str(_error(data)) == "site.yaml: resources.cpu.cpus: must be >= 1, got 0"
    data["resources"]["cpu"]["cpus"] = "four"
    assert str(_error(data)) == "site.yaml: resources.cpu.cpus: expected a whole number, got 'four'"
    port_error = _error(_with(transport={"port": 70000}))
    assert str(port_error) == "site.yaml: transport.port: must be <= 65535, got 70000"
    assert str(_error(_with(policy={"name": "Fifo"}))) == (
        "site.yaml: policy.name: expected a name matching ^[a-z][a-z0-9_-]*$, got 'Fifo'"
    )
    assert str(_error(_with(cluster={"name": "t", "slurm_version": "21.08"}))) == (
        "site.yaml: cluster.slurm_version: Slurm 21.08 is older than 22.05, the oldest release slurmx reads"
    )
    assert str(_error(_with(cluster={"name": "t", "slurm_version": "24.11.5"}))) == (
        "site.yaml: cluster.slurm_version: expected a Slurm release as YY.MM, the year and month it came out "
        "(e.g. '24.11'), got '24.11.5'"
    )
    for bad in ("24.13", "24.00", "2024.11", "24.1", "v24.11"):
        assert str(_error(_with(cluster={"name": "t", "slurm_version": bad}))).startswith(
            "site.yaml: cluster.slurm_version: expected a Slurm release as YY.MM"), bad


def test_all_errors_kept_first_reported() -> None:
    data = _with(transport={"kind": "ssh"}, preemption={"signal": "KILL"})
    data["resources"]["gpu"]["gres"] = "gpu2"
    err = _error(data)
    assert len(err.errors) == 3
    assert str(err) == err.errors[0] == "site.yaml: resources.gpu.gres: expected NAME:COUNT, got 'gpu2'"
    assert all(e.startswith("site.yaml: ") and "\n" not in e for e in err.errors)


def test_not_a_mapping() -> None:
    assert str(_error(["cluster"])) == "site.yaml: expected a mapping of keys at top level, got list"
    err = _error(_with(resources={"cpu": "big"}))
    assert str(err) == "site.yaml: resources.cpu: expected a mapping, got 'big'"


def test_default_source_name() -> None:
    with pytest.raises(ConfigError, match=r"^<site>: cluster: required key is missing$"):
        parse_site_config({"resources": MINIMAL["resources"]})


# ---- loading from files ------------------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as info:
        load_site_config(path)
    assert str(info.value) == f"{path}: file not found; pass --site PATH or set SLURMX_SITE"


def test_yaml_syntax_error_has_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "cluster:\n  name: t\n   bad: 1\n")
    with pytest.raises(ConfigError) as info:
        load_site_config(path)
    assert str(info.value) == f"{path}: line 3, column 7: mapping values are not allowed here"


def test_duplicate_key_rejected(tmp_path: Path) -> None:
    path = _write(tmp_path, "cluster: {name: a}\nresources: {}\ncluster: {name: b}\n")
    with pytest.raises(ConfigError) as info:
        load_site_config(path)
    assert str(info.value) == f"{path}: line 3, column 1: duplicate key 'cluster'"


def test_empty_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="file is empty"):
        load_site_config(_write(tmp_path, "# nothing\n"))


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    text = "cluster: {name: t}\nresources:\n  gpu: {partition: gpu, cpus: 1, mem: 1G, gres: gpu2}\n"
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_site_config(str(path))
    assert str(info.value) == f"{path}: resources.gpu.gres: expected NAME:COUNT, got 'gpu2'"


@pytest.mark.parametrize(
    "mutation",
    [
        {"transport": {"kind": "ssh"}},
        {"preemption": {"grace": "x\ny"}},
        {"resources": {"cpu": {"partition": "a\nb", "cpus": 1, "mem": "1G"}}},
    ],
)
def test_config_error_is_one_line(mutation: dict[str, Any]) -> None:
    err = _error(_with(**mutation))
    assert "\n" not in str(err)
    assert all("\n" not in e for e in err.errors)


@pytest.mark.parametrize(("given", "kept"), [("127.0.0.1", "127.0.0.1"), ("0.0.0.0", "0.0.0.0"), ("::1", "::1"),
                                             ("[::1]", "::1"), ("login-1.cluster.example", "login-1.cluster.example")])
def test_metrics_address_takes_an_ip_or_a_host_name(given: str, kept: str) -> None:
    assert parse_site_config(_with(daemon={"metrics_address": given})).daemon.metrics_address == kept
    assert parse_site_config(_with()).daemon.metrics_address == "127.0.0.1"


@pytest.mark.parametrize("bad", ["http://0.0.0.0", "127.0.0.1:9810", "host name", "", "-lead.example"])
def test_metrics_address_refuses_anything_else_in_one_line(bad: str) -> None:
    assert str(_error(_with(daemon={"metrics_address": bad}))) == (
        f"site.yaml: daemon.metrics_address: expected an IP address or a host name (e.g. 127.0.0.1, ::1, 0.0.0.0), "
        f"got {bad!r}")


@pytest.mark.parametrize("version", ["22.05", "23.02", "23.11", "25.05", "27.05"])
def test_any_slurm_release_from_22_05_is_accepted(version: str) -> None:
    assert parse_site_config(_with(cluster={"name": "t", "slurm_version": version})).cluster.slurm_version == version


def test_the_oldest_slurm_agrees_with_the_adapter() -> None:
    from slurmx.core.config import OLDEST_SLURM
    from slurmx.slurm.versions import OLDEST, version_key

    assert version_key(OLDEST) == OLDEST_SLURM
