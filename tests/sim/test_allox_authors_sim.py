"""`slurmx reproduce allox --only authors-sim`: the authors' own simulator (IRFsim) beside our engine.

The end-to-end test runs their Java simulator (DRFA, one of their fastest methods) and ours on the same 10,000 jobs; it
needs their pack (`../shared/peers/allox-irfsim` or SLURMX_ALLOX_PEER) and a JDK, and says so when skipped.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from slurmx.cli.reproduce import reproduce_command
from slurmx.reproduce import ReproOptions, UnknownPaper, run
from slurmx.reproduce.allox import authors_sim
from slurmx.reproduce.allox.authors_sim import JobTimes, compare_method, missing, peer_dir, read_peer_csv
from slurmx.sim.jobs import SimJob
from tests.sim.test_reproduce_allox import _job


def test_an_absent_pack_is_one_line_naming_the_variable_and_the_run_exits_0(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(authors_sim.PEER_ENV, str(tmp_path / "nowhere"))
    result = CliRunner().invoke(reproduce_command, ["allox", "--only", "authors-sim", "--workers", "1"])
    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if "authors-sim: skipped" in x)
    assert "nowhere" in line and authors_sim.PEER_ENV in line
    assert "Traceback" not in result.output


def test_without_a_jdk_the_line_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("run.sh", "build.sh"):
        (tmp_path / name).write_text("#!/bin/sh\n")
    (tmp_path / "input").mkdir()
    (tmp_path / "input" / authors_sim.INPUT_NAME).write_text("")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert "install a JDK" in missing(tmp_path)
    assert "javac" in missing(tmp_path)


def test_the_pack_defaults_to_the_shared_peers_folder_beside_the_repository(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(authors_sim.PEER_ENV, raising=False)
    repo = Path(__file__).resolve().parents[2]
    assert peer_dir() == repo.parent / "shared" / "peers" / "allox-irfsim"
    monkeypatch.setenv(authors_sim.PEER_ENV, "/x/y")
    assert peer_dir() == Path("/x/y")


def test_an_unknown_method_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(authors_sim.METHODS_ENV, "drff,srtp")
    with pytest.raises(UnknownPaper, match=r"SLURMX_ALLOX_PEER_METHODS='drff,srtp': unknown method\(s\) srtp; "
                                           r"choose from drff, drfs, es, drfa, allox"):
        authors_sim.selected_methods()
    monkeypatch.setenv(authors_sim.METHODS_ENV, " ES , drff,es")
    assert authors_sim.selected_methods() == ("es", "drff")


def test_their_csv_is_read_with_the_kind_from_the_run_time(tmp_path: Path) -> None:
    # job 0: 70 CPU, 10 GPU units; job 1 ran for neither of its times (DRFExt's fallback); -100000: a sample
    jobs: dict[int, SimJob] = {0: _job("allox-0", "user0", 600.0, 4200.0), 1: _job("allox-1", "user1", 600.0, 4200.0)}
    path = tmp_path / "M.csv"
    path.write_text("JobId,startTime,endTime,duration,queueName,startRunning,runningTime,isCPU\n"
                    "0,0.0,75.0,75.0,queue0,5.0,70.0,0\n1,2.0,40.0,38.0,queue1,30.0,10.0,0\n"
                    "2,2.0,50.0,48.0,queue1,30.0,20.0,0\n-100000,0.0,1.0,1.0,queue0,0.0,1.0,0\n")
    jobs[3] = _job("allox-3", "user1", 600.0, 600.0)  # as fast on both kinds: the device cannot be told
    with path.open("a") as f:
        f.write("3,2.0,50.0,48.0,queue1,40.0,10.0,0\n")
    got = read_peer_csv(path, jobs)
    assert got == {"allox-00000": JobTimes(5.0, 75.0, "cpu"), "allox-00001": JobTimes(30.0, 40.0, "gpu"),
                   "allox-00002": JobTimes(30.0, 50.0, "other"), "allox-00003": JobTimes(40.0, 50.0, "either")}
    either = compare_method("es", {"x": got["allox-00003"]}, {"x": JobTimes(40.0, 50.0, "cpu")}, {"x": 2.0})
    assert either.kind_match == 1.0 and either.first is None
    path.write_text("JobId,startTime\nx,1\n")
    with pytest.raises(UnknownPaper, match=r"M.csv:2: not a row of the authors' per-job CSV"):
        read_peer_csv(path, jobs)


def test_the_first_divergence_is_the_first_job_in_their_start_order_that_differs() -> None:
    submit = {"a": 0.0, "b": 0.0, "c": 1.0, "d": 2.0}
    theirs = {"a": JobTimes(0, 10, "gpu"), "b": JobTimes(1, 5, "gpu"), "c": JobTimes(3, 9, "cpu"),
              "d": JobTimes(4, 8, "gpu")}
    ours = {"a": JobTimes(0.5, 10.5, "gpu"), "b": JobTimes(1, 5, "gpu"), "c": JobTimes(3, 9, "gpu"),
            "d": JobTimes(7, 11, "gpu")}
    m = compare_method("es", theirs, ours, submit)
    assert (m.jobs, m.end_match, m.start_match, m.kind_match) == (4, 0.75, 0.75, 0.75)
    assert m.first == ("c", theirs["c"], ours["c"])  # a is within a unit; c changed kind before d moved
    assert m.theirs_jct == pytest.approx((10 + 5 + 8 + 6) / 4) and m.ours_jct == pytest.approx((10.5 + 5 + 8 + 9) / 4)
    same = compare_method("es", theirs, theirs, submit)
    assert same.first is None and same.end_match == 1.0
    # with samples: d's sample (their -299998 reads as d~3) parts first, at t = 2, and stays out of the shares
    with_samples = {**theirs, "d~3": JobTimes(2, 3, "either")}
    m = compare_method("es", with_samples, {**ours, "d~3": JobTimes(2.5, 6, "gpu")}, submit)
    assert m.first_any == ("d~3", with_samples["d~3"], JobTimes(2.5, 6, "gpu")) and m.jobs == 4
    assert m.first == ("c", theirs["c"], ours["c"])
    assert compare_method("es", with_samples, with_samples, submit).first_any is None


def test_their_samples_are_read_under_our_names(tmp_path: Path) -> None:
    jobs: dict[int, SimJob] = {7: _job("allox-7", "user0", 600.0, 4200.0)}
    path = tmp_path / "M.csv"
    path.write_text("JobId,startTime,endTime,duration,queueName,startRunning,runningTime,isCPU\n"
                    "-99993,0.0,4.0,4.0,queue0,1.0,3.0,true\n-399993,0.0,2.0,2.0,queue0,0.0,2.0,false\n")
    assert read_peer_csv(path, jobs) == {}
    assert read_peer_csv(path, jobs, samples=True) == {"allox-00007~1": JobTimes(1.0, 4.0, "either"),
                                                      "allox-00007~4": JobTimes(0.0, 2.0, "either")}


def test_the_authors_simulator_and_ours_run_on_the_same_input(monkeypatch: pytest.MonkeyPatch) -> None:
    why = missing(peer_dir())
    if why:
        pytest.skip(why)
    monkeypatch.setenv(authors_sim.METHODS_ENV, "drfa")  # their DRFExt: about a minute; ours twice, ~40 s each
    result = run("allox", ReproOptions(workers=1, progress=False, only=("authors-sim",)))
    drfa = result.data["authors-sim"]["methods"]["drfa"]
    assert drfa["jobs"] == 10_000
    assert drfa["theirs_jct"] == pytest.approx(293.75, abs=0.01)  # their README's DRFExt, run as packaged
    assert drfa["options"] == ["drf_ties", "sample_order", "profiling_samples"]
    assert drfa["ours_jct"] != drfa["ours_default_jct"]
    assert 100 < drfa["ours_default_jct"] < 200 and 0.0 <= drfa["end_match"] <= 1.0
    first = drfa["first_divergence"]
    assert first is not None and first["theirs"] != first["ours"]
    assert [t.title.split(":")[0] for t in result.tables] == ["authors-sim", "authors-sim"]
    assert any(c.startswith("authors-sim: their simulator from") for c in result.conditions)
    assert "authors-sim: ablation skipped (SLURMX_ALLOX_PEER_METHODS names a subset)" in result.conditions


def test_switches_are_dash_d_words_and_anything_else_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(authors_sim.SWITCHES_ENV, raising=False)
    assert authors_sim.switches() == ()
    monkeypatch.setenv(authors_sim.SWITCHES_ENV, " -Dirfx.freeprof=true  -Dirf.prof=false ")
    assert authors_sim.switches() == ("-Dirfx.freeprof=true", "-Dirf.prof=false")
    monkeypatch.setenv(authors_sim.SWITCHES_ENV, "-Dirfx.freeprof=true; rm")
    with pytest.raises(UnknownPaper, match=r"SLURMX_ALLOX_PEER_SWITCHES: 'rm' is not a -Dname=value switch"):
        authors_sim.switches()
