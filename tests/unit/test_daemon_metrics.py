"""slurmxd's metrics and `/healthz`: every series present from the start, counts that move with events, a health
answer that follows the cycles and Slurm, and every action the enforcer reports known in advance."""

from __future__ import annotations

import json
import platform
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from slurmx.core.config import SiteConfig
from slurmx.daemon.endpoint import health_limit, serve_metrics
from slurmx.daemon.errors import DaemonError
from slurmx.daemon.metrics import ACTION_OUTCOMES, ERROR_WHERE, GROUP_STATES, PHASES, Metrics, package_version
from slurmx.daemon.store import Store
from slurmx.policies.base import make_policy
from slurmx.slurm.errors import SlurmUnavailable
from tests.unit.test_daemon import SITE, FakeSlurm, job
from tests.unit.test_daemon_resilience import FailingSlurm, Ticks

DAEMON_DIR = Path(__file__).resolve().parents[2] / "slurmx" / "daemon"


def samples(metrics: Metrics) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """The scrape, parsed back: (sample name, labels) -> value."""
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(metrics.render()) for s in family.samples}


def value(metrics: Metrics, name: str, **labels: str) -> float | None:
    return samples(metrics).get((name, frozenset(labels.items())))


def test_a_scrape_before_any_event_shows_every_known_series_at_zero() -> None:
    metrics = Metrics()
    for kind, outcomes in ACTION_OUTCOMES.items():
        for outcome in outcomes:
            assert value(metrics, "slurmxd_actions_total", type=kind, outcome=outcome) == 0.0
    for where in ERROR_WHERE:
        assert value(metrics, "slurmxd_cycle_failures_total", where=where) == 0.0
    for phase in PHASES:
        assert value(metrics, "slurmxd_cycle_phase_seconds_count", phase=phase) == 0.0
    assert value(metrics, "slurmxd_preemptions_total") == 0.0
    assert value(metrics, "slurmxd_decision_seconds_count") == 0.0
    assert value(metrics, "slurmxd_cycle_seconds_count") == 0.0
    assert value(metrics, "slurmxd_leases_expired_total") == 0.0
    for state in GROUP_STATES:
        assert value(metrics, "slurmxd_groups", state=state) == 0.0
    assert value(metrics, "slurmxd_build_info", version=package_version(), python=platform.python_version()) == 1.0
    names = {name for name, _ in samples(metrics)}
    assert "process_cpu_seconds_total" in names and "python_info" in names  # process and platform collectors
    assert not any(name.endswith("_created") for name in names)  # creation times double the series for nothing


def test_events_move_their_series_and_only_theirs() -> None:
    metrics = Metrics()
    metrics.action("start", "ok")
    metrics.action("preempt", "ok")
    metrics.action("preempt", "error")
    metrics.action("newkind", "ok")  # an action type not in the table still counts
    metrics.cycle(0.2)
    metrics.decision(0.03)
    metrics.phase("observe", 0.03)
    metrics.groups("pending", 3)
    metrics.leases_expired(2)
    metrics.leases_expired(0)
    metrics.error("cycle")
    assert value(metrics, "slurmxd_actions_total", type="start", outcome="ok") == 1.0
    assert value(metrics, "slurmxd_actions_total", type="start", outcome="error") == 0.0
    assert value(metrics, "slurmxd_actions_total", type="newkind", outcome="ok") == 1.0
    assert value(metrics, "slurmxd_preemptions_total") == 1.0  # grace signals sent: the failed one is not
    assert value(metrics, "slurmxd_cycle_seconds_bucket", le="0.1") == 0.0
    assert value(metrics, "slurmxd_cycle_seconds_bucket", le="0.25") == 1.0
    assert value(metrics, "slurmxd_decision_seconds_bucket", le="0.01") == 0.0
    assert value(metrics, "slurmxd_decision_seconds_bucket", le="0.05") == 1.0
    assert value(metrics, "slurmxd_cycle_phase_seconds_bucket", phase="observe", le="0.05") == 1.0
    assert value(metrics, "slurmxd_cycle_phase_seconds_count", phase="enforce") == 0.0
    assert value(metrics, "slurmxd_groups", state="pending") == 3.0
    assert value(metrics, "slurmxd_groups", state="running") == 0.0
    assert value(metrics, "slurmxd_leases_expired_total") == 2.0
    assert metrics.errors == {"cycle": 1}


def test_each_metrics_has_its_own_registry() -> None:
    first, second = Metrics(), Metrics()
    first.error("watchdog")
    assert first.errors == {"watchdog": 1} and second.errors == {}


def test_slurm_commands_adds_deltas_by_command() -> None:
    metrics = Metrics()
    metrics.slurm_commands({"squeue": 2, "scontrol": 1})
    metrics.slurm_commands({"squeue": 3, "sinfo": 0})
    assert value(metrics, "slurmxd_slurm_commands_total", command="squeue") == 5.0
    assert value(metrics, "slurmxd_slurm_commands_total", command="scontrol") == 1.0
    with pytest.raises(ValueError, match="squeue: a count of -1"):
        metrics.slurm_commands({"squeue": -1})
    assert value(metrics, "slurmxd_slurm_commands_total", command="squeue") == 5.0


def test_health_follows_the_last_successful_cycle_and_slurm() -> None:
    metrics = Metrics()
    assert metrics.health.check(100.0, 45.0) == (False, "no successful cycle yet")
    metrics.cycle_ok(100.0)
    assert metrics.health.check(130.0, 45.0) == (True, "last successful cycle 30 s ago")
    assert metrics.health.check(146.0, 45.0) == (False, "last successful cycle 46 s ago (limit 45 s)")
    metrics.slurm_down()
    assert metrics.health.check(101.0, 45.0) == (False, "the last cycle could not reach Slurm")
    assert value(metrics, "slurmxd_slurm_up") == 0.0
    metrics.cycle_ok(200.0)
    assert metrics.health.check(201.0, 45.0)[0]
    assert value(metrics, "slurmxd_slurm_up") == 1.0
    assert value(metrics, "slurmxd_last_cycle_timestamp_seconds") == 200.0


def test_health_limit_is_three_intervals_and_thirty_seconds() -> None:
    assert health_limit(5) == 45.0 and health_limit(60) == 210.0


@pytest.fixture
def served() -> Iterator[tuple[Metrics, str, list[float]]]:
    metrics, now = Metrics(), [1000.0]
    server = serve_metrics(metrics, 0, max_age_s=45.0, clock=lambda: now[0])
    try:
        yield metrics, f"http://127.0.0.1:{server.server_port}", now
    finally:
        server.shutdown()
        server.server_close()


def _get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, answer.headers["Content-Type"], answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


def test_endpoint_serves_metrics_and_healthz_on_one_port(served: tuple[Metrics, str, list[float]]) -> None:
    metrics, base, now = served
    metrics.error("cycle")
    status, kind, body = _get(f"{base}/metrics")
    assert status == 200 and kind.startswith("text/plain")
    assert 'slurmxd_cycle_failures_total{where="cycle"} 1.0' in body
    status, kind, body = _get(f"{base}/healthz")
    assert (status, kind) == (503, "application/json")
    assert json.loads(body) == {"status": "unhealthy", "reason": "no successful cycle yet"}
    metrics.cycle_ok(990.0)
    status, _, body = _get(f"{base}/healthz")
    assert status == 200 and json.loads(body)["status"] == "ok"
    now[0] = 1100.0
    status, _, body = _get(f"{base}/healthz")
    assert status == 503 and "110 s ago" in json.loads(body)["reason"]
    assert _get(f"{base}/other")[0] == 404


def test_endpoint_listens_on_ipv6_loopback() -> None:
    metrics = Metrics()
    try:
        server = serve_metrics(metrics, 0, "::1")
    except OSError:
        pytest.skip("no IPv6 loopback here")
    try:
        assert _get(f"http://[::1]:{server.server_port}/metrics")[0] == 200
    finally:
        server.shutdown()
        server.server_close()


def test_a_daemon_cycle_records_its_phases_success_and_slurm_up(tmp_path: Path) -> None:
    from slurmx.daemon.loop import Daemon

    daemon = Daemon(SITE, FakeSlurm([job(1, "a")]), Store(tmp_path / "s.sqlite"),  # type: ignore[arg-type]
                    make_policy("fifo"), clock=lambda: 1234.0)
    daemon.cycle()
    metrics = daemon.metrics
    for phase in PHASES:
        assert value(metrics, "slurmxd_cycle_phase_seconds_count", phase=phase) == 1.0
    assert value(metrics, "slurmxd_decision_seconds_count") == 1.0
    assert value(metrics, "slurmxd_cycle_seconds_count") == 1.0
    cycle_s = value(metrics, "slurmxd_cycle_seconds_sum")
    decision_s = value(metrics, "slurmxd_decision_seconds_sum")
    assert cycle_s is not None and decision_s is not None and 0 < decision_s < cycle_s  # the decision is a part
    assert value(metrics, "slurmxd_interval_seconds") == SITE.daemon.interval_s
    assert value(metrics, "slurmxd_lease_seconds") == SITE.daemon.lease_s
    assert value(metrics, "slurmxd_groups", state="pending") == 1.0  # as observed, before FIFO started it
    assert value(metrics, "slurmxd_last_cycle_timestamp_seconds") == 1234.0
    assert value(metrics, "slurmxd_slurm_up") == 1.0
    assert value(metrics, "slurmxd_actions_total", type="start", outcome="ok") == 1.0  # FIFO started group a
    assert metrics.health.check(1240.0, 45.0)[0]


def test_a_cycle_that_cannot_reach_slurm_marks_it_down_and_keeps_the_last_success(tmp_path: Path) -> None:
    from slurmx.daemon.loop import Daemon

    fake = FailingSlurm([None, SlurmUnavailable(["squeue"], None, "timed out")])
    daemon = Daemon(SITE, fake, Store(tmp_path / "s.sqlite"), make_policy("fifo"),  # type: ignore[arg-type]
                    clock=lambda: 1000.0)
    daemon.run(Ticks(2))
    assert daemon.cycles == 2 and daemon.metrics.errors == {"cycle": 1}
    assert value(daemon.metrics, "slurmxd_slurm_up") == 0.0
    assert value(daemon.metrics, "slurmxd_last_cycle_timestamp_seconds") == 1000.0
    assert daemon.metrics.health.check(1001.0, 45.0) == (False, "the last cycle could not reach Slurm")


_ON_ACTION = re.compile(r'on_action\("(\w+)", "(\w+)"\)')


def test_every_action_the_enforcer_reports_is_initialised() -> None:
    """A new `on_action(...)` call in the enforcer must add its pair to ACTION_OUTCOMES (else it starts absent)."""
    from slurmx.daemon.enforce import Enforcer

    reported: set[tuple[str, str]] = set()
    for path in sorted(DAEMON_DIR.glob("enforce*.py")):
        reported |= set(_ON_ACTION.findall(path.read_text()))
    # The calls with a computed type: one per step's action (`_one`, `_run`), and preempt/resize's `_signal`.
    steps = {kind.__name__.lower() for kind in Enforcer.steps(object.__new__(Enforcer))}  # type: ignore[arg-type]
    reported |= {(kind, outcome) for kind in steps for outcome in ("ok", "error")}
    reported |= {("resize", "signalled")}
    reported |= set(re.findall(r'metrics\.action\("(\w+)", "(\w+)"\)', (DAEMON_DIR / "loop.py").read_text()))
    known = {(kind, outcome) for kind, outcomes in ACTION_OUTCOMES.items() for outcome in outcomes}
    assert reported == known



def _site_with_port(port: int, address: str = "127.0.0.1") -> SiteConfig:
    return SITE.model_copy(update={"daemon": SITE.daemon.model_copy(
        update={"metrics_port": port, "metrics_address": address})})


def test_a_port_it_cannot_bind_is_one_line_naming_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from slurmx.daemon import main
    from slurmx.daemon.loop import Daemon

    daemon = Daemon(SITE, FakeSlurm([]), Store(tmp_path / "s.sqlite"), make_policy("fifo"))  # type: ignore[arg-type]
    busy = serve_metrics(Metrics(), 0)
    try:
        with pytest.raises(DaemonError) as info:
            main._serve(daemon, _site_with_port(busy.server_port))
    finally:
        busy.shutdown()
        busy.server_close()
    assert str(info.value).startswith(f"daemon.metrics_address/metrics_port: cannot listen on "
                                      f"127.0.0.1:{busy.server_port} (")
    assert str(info.value).endswith("); free the port or choose another address or port")

    def refused(*args: object, **kw: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(main, "serve_metrics", refused)
    with pytest.raises(DaemonError, match=r"^daemon.metrics_port 80: binding a port below 1024 needs root or "
                                          r"CAP_NET_BIND_SERVICE; choose a port of 1024 or more"):
        main._serve(daemon, _site_with_port(80))
    assert main._serve(daemon, SITE) is None  # no port: no endpoint


def test_a_drained_cycle_keeps_the_daemon_healthy_without_claiming_slurm_up(tmp_path: Path) -> None:
    from slurmx.daemon.drain import DRAIN_MARKER
    from slurmx.daemon.loop import Daemon

    (tmp_path / DRAIN_MARKER).write_text("drained\n")
    site = SITE.model_copy(update={"daemon": SITE.daemon.model_copy(update={"state_dir": tmp_path})})
    daemon = Daemon(site, FakeSlurm([job(1, "a")]), Store(tmp_path / "s.sqlite"),  # type: ignore[arg-type]
                    make_policy("fifo"), clock=lambda: 500.0)
    daemon.cycle()
    assert value(daemon.metrics, "slurmxd_last_cycle_timestamp_seconds") == 500.0
    assert value(daemon.metrics, "slurmxd_slurm_up") == 0.0 and daemon.metrics.health.slurm_up is None
    assert daemon.metrics.health.check(510.0, 45.0) == (True, "last successful cycle 10 s ago")
    assert value(daemon.metrics, "slurmxd_decision_seconds_count") == 0.0  # nothing decided
