"""`slurmx reproduce allox --only authors-sim`: the AlloX authors' own simulator (IRFsim) beside our engine.

The authors' Java simulator is not part of this project (it has no licence): a reference pack of it, with its
build and one-method run scripts and its input, lives outside the repository, by default in
`../shared/peers/allox-irfsim` (set `SLURMX_ALLOX_PEER` to another folder). When that folder and a JDK are
present, this copies the pack to a temporary directory, builds it, runs the selected methods with the paper's
settings (its `run.sh`), runs ours on the same input file with the same settings (the `authors` experiment's
runs), and compares the two per method (average JCT) and per job (start, end, machine kind): the share of jobs
whose times match within `TOLERANCE_UNITS`, and the first job, in their start order, where the two differ.
`SLURMX_ALLOX_PEER_METHODS` picks the methods (default all five; their AlloX alone takes 8-24 minutes here), and
`SLURMX_ALLOX_PEER_SWITCHES` runs their pack's patched build with -D switches, e.g. to turn off a behaviour of
their code that our engine does not model (`-Dirfx.freeprof=true`: profiling samples hold no machine); with
`-Dirf.prof=false` (no profiling) ours runs without profiling too. The per-job shares are printed for ours with
the options and with our defaults (which of the two their run should match depends on the switches).

Their times are in steps of one unit (their plots call it a minute; ours is 60 s). Their per-job CSV gives the
run time but sets the device only for some methods, so the device is read off the run time: the job's true CPU
time is a CPU node, its true GPU time a GPU, both ("either") cannot be told apart and match any kind, anything else
("other") is neither (DRFExt's CPU fallback runs a job for another job's time).
"""

from __future__ import annotations

import csv
import math
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from slurmx.reproduce import UnknownPaper
from slurmx.reproduce.allox.authors_input import authors_jobs, job_name
from slurmx.reproduce.allox.experiment import (
    AS_AUTHORS_SIM,
    AUTHORS_SIM_OPTIONS,
    DEFAULT_OVERHEAD,
    FULL,
    UNIT_S,
    RunSpec,
)
from slurmx.reproduce.allox.samples import is_sample
from slurmx.reproduce.base import ResultTable
from slurmx.sim.jobs import SimJob
from slurmx.sim.parallel import parallel_map
from slurmx.sim.runner import run_config

__all__ = ["DEFAULT_PEER", "EITHER", "METHODS_ENV", "PEER_ENV", "PEER_METHODS", "SWITCHES_ENV", "TOLERANCE_UNITS",
           "Comparison", "JobTimes", "MethodComparison", "as_data", "compare", "compare_method", "missing",
           "options_of", "peer_dir", "read_peer_csv", "run_authors_sim", "run_ours", "selected_methods", "switches",
           "tables"]

PEER_ENV = "SLURMX_ALLOX_PEER"  # the pack's folder (default DEFAULT_PEER)
METHODS_ENV = "SLURMX_ALLOX_PEER_METHODS"  # comma-separated policies to compare (default: all of PEER_METHODS)
# Space-separated -D switches of the pack's patched build (its README: -Dirfx.freeprof=true and others), to run
# their simulator with behaviours our engine does not model turned off; set, the pack's build_switches is used.
SWITCHES_ENV = "SLURMX_ALLOX_PEER_SWITCHES"
NO_PROFILING = "-Dirf.prof=false"  # their profiling off (a switch of the unpatched build too): ours runs without
DEFAULT_PEER = Path(__file__).resolve().parents[3].parent / "shared" / "peers" / "allox-irfsim"
# our policy -> their method name (the pack's README: DRFF = DRFFIFO, DRFS = DRF, DRFA = DRFExt)
PEER_METHODS = {"drff": "DRFFIFO", "drfs": "DRF", "es": "ES", "drfa": "DRFExt", "allox": "AlloX"}
EITHER = "either"  # their run time equals the job's time on both kinds: the device cannot be told
TOLERANCE_UNITS = 1.0  # their clock steps by one unit: a time within one step of ours matches
INPUT_NAME = "jobs_input_10_Google_m1.txt"
RUN_TIMEOUT_S = 3 * 3600  # their AlloX takes 8-24 min on a busy 2-core machine; a hung JVM must not hang us


@dataclass(frozen=True)
class JobTimes:
    """One job's start and end (units) and the machine kind it ran on ("cpu", "gpu" or "other")."""

    start: float
    end: float
    kind: str


@dataclass(frozen=True)
class MethodComparison:
    """One method, theirs beside ours (with the authors'-simulator options on): average JCT, per-job match
    shares, the first divergence; and our average JCT with our defaults."""

    policy: str
    theirs_jct: float
    ours_jct: float
    jobs: int
    end_match: float  # share of jobs whose end matches within the tolerance
    start_match: float
    kind_match: float
    first: tuple[str, JobTimes, JobTimes] | None  # (job, theirs, ours) of the first job that differs
    ours_default_jct: float = math.nan  # ours with our defaults (no authors'-simulator option)
    options: tuple[str, ...] = ()  # the authors'-simulator options that apply to this method
    default_end_match: float = math.nan  # share of jobs whose end matches, ours with our defaults
    # the first job or profiling sample (name~n) whose start or end differs, by the earlier of the two starts
    first_any: tuple[str, JobTimes, JobTimes] | None = None


@dataclass(frozen=True)
class Comparison:
    """The whole harness's answer: what ran, or the one line saying why it could not."""

    skipped: str = ""
    methods: tuple[MethodComparison, ...] = ()
    peer: str = ""
    switches: tuple[str, ...] = ()  # the -D switches their simulator ran with (SWITCHES_ENV)


def peer_dir() -> Path:
    """The pack's folder: `SLURMX_ALLOX_PEER` if set, else `../shared/peers/allox-irfsim` beside the repository."""
    value = os.environ.get(PEER_ENV, "").strip()
    return Path(value).expanduser() if value else DEFAULT_PEER


def missing(peer: Path) -> str:
    """Why the authors' simulator cannot run here (one line naming what to install or set), or ''."""
    if not (peer / "run.sh").is_file() or not (peer / "build.sh").is_file():
        return (f"authors-sim: skipped: no authors' simulator pack at {peer} (needs build.sh and run.sh); "
                f"set {PEER_ENV} to its folder")
    if not (peer / "input" / INPUT_NAME).is_file():
        return f"authors-sim: skipped: {peer / 'input' / INPUT_NAME} is missing"
    absent = [tool for tool in ("javac", "java", "bash") if shutil.which(tool) is None]
    if absent:
        return (f"authors-sim: skipped: {' and '.join(absent)} not found; install a JDK 8 or newer "
                "(e.g. apt-get install default-jdk-headless)")
    return ""


def selected_methods() -> tuple[str, ...]:
    """The policies `SLURMX_ALLOX_PEER_METHODS` names (all of PEER_METHODS by default); one-line error otherwise."""
    value = os.environ.get(METHODS_ENV, "").strip()
    if not value:
        return tuple(PEER_METHODS)
    names = tuple(dict.fromkeys(n.strip().lower() for n in value.split(",") if n.strip()))
    unknown = [n for n in names if n not in PEER_METHODS]
    if unknown or not names:
        raise UnknownPaper(f"allox: {METHODS_ENV}={value!r}: unknown method(s) {', '.join(unknown) or '(none)'}; "
                           f"choose from {', '.join(PEER_METHODS)}")
    return names


def _run(argv: Sequence[str], cwd: Path, what: str) -> None:
    try:
        done = subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UnknownPaper(f"allox: authors-sim: {what} failed ({exc})") from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise UnknownPaper(f"allox: authors-sim: {what} exited {done.returncode}: {tail[0]}")


def switches() -> tuple[str, ...]:
    """The -D switches `SLURMX_ALLOX_PEER_SWITCHES` names (none by default); one-line error for another word."""
    words = tuple(os.environ.get(SWITCHES_ENV, "").split())
    bad = [w for w in words if not w.startswith("-D") or "=" not in w]
    if bad:
        raise UnknownPaper(f"allox: {SWITCHES_ENV}: {bad[0]!r} is not a -Dname=value switch "
                           "(e.g. -Dirfx.freeprof=true)")
    return words


def run_authors_sim(peer: Path, methods: Sequence[str], work: Path, flags: Sequence[str] = ()) -> dict[str, Path]:
    """Copy the pack into `work`, build it and run each method with its `run.sh` (the paper's settings, plus
    `flags`: -D switches of its patched build); their per-job CSV of each policy."""
    copy = work / "irfsim"
    shutil.copytree(peer, copy, ignore=shutil.ignore_patterns("build", "build_switches", "results", "output", "log"))
    _run(["bash", "build.sh", *(["--switches"] if flags else [])], copy, "build.sh")
    out: dict[str, Path] = {}
    for policy in methods:
        method = PEER_METHODS[policy]
        argv = ["env", "BUILD=build_switches"] if flags else []
        argv += ["bash", "run.sh", method, *flags]
        _run(argv, copy, f"run.sh {method} {' '.join(flags)}".strip())
        out[policy] = copy / "results" / f"{method}.csv"
    return out


def _sample_name(job_id: int) -> str:
    """Their sample id (-100000 * n + job, n = 1..4: CPU 1%, CPU 2%, GPU 1%, GPU 2%) as ours (`job~n`)."""
    n = -(job_id // 100_000)
    return f"{job_name(job_id + 100_000 * n)}~{n}"


def read_peer_csv(path: Path, jobs: Mapping[int, SimJob], samples: bool = False) -> dict[str, JobTimes]:
    """Their per-job CSV (JobId, arrival, end, JCT, queue, start, run time, isCPU) keyed by our job id; the
    kind read off the run time against the input's true times. The profiling samples (JobId < 0) are left
    out, or with `samples` named as ours (`samples.with_samples`), of kind "either" (their isCPU column
    does not say where ES ran one)."""
    out: dict[str, JobTimes] = {}
    try:
        with path.open(encoding="ascii", newline="") as f:
            rows = csv.reader(f)
            next(rows, None)
            for number, row in enumerate(rows, start=2):
                try:
                    job_id, end, start, run = int(row[0]), float(row[2]), float(row[5]), float(row[6])
                except (IndexError, ValueError):
                    raise UnknownPaper(f"allox: {path}:{number}: not a row of the authors' per-job CSV") from None
                if job_id < 0:
                    if samples:
                        out[_sample_name(job_id)] = JobTimes(start, end, EITHER)
                    continue
                job = jobs.get(job_id)
                kinds = [name for name, variant in (job.variants.items() if job is not None else ())
                         if abs(run - variant.duration_s / UNIT_S) < 1e-6]
                kind = kinds[0] if len(kinds) == 1 else EITHER if kinds else "other"
                out[job_name(job_id)] = JobTimes(start, end, kind)
    except OSError as exc:
        raise UnknownPaper(f"allox: authors-sim: cannot read {path} ({exc})") from None
    return out


def options_of(policy: str) -> tuple[str, ...]:
    """The authors'-simulator options (`experiment.AUTHORS_SIM_OPTIONS`) that change `policy`'s runs."""
    return tuple(name for name, by_policy in AUTHORS_SIM_OPTIONS.items() if policy in by_policy)


def run_ours(task: tuple[str, Path, str, float]) -> dict[str, JobTimes]:
    """Our engine on the pack's input with the `authors` experiment's settings for `policy`, the RunSpec
    variant (AS_AUTHORS_SIM: the authors'-simulator options on) and the profiling overhead; top level, so a
    pool can pickle it."""
    policy, input_path, variant, overhead = task
    spec = RunSpec.make(policy, 0, FULL, source="authors", variant=variant, overhead=overhead)
    jobs = spec.with_samples(authors_jobs(input_path, with_errors=spec.error_sd > 0))
    result = run_config(spec.config(jobs), jobs)
    return {r.job_id: JobTimes((r.first_start if r.first_start is not None else math.nan) / UNIT_S,
                               r.finish / UNIT_S, r.kind or "other")
            for r in result.jobs if not r.cancelled}


def _mean_jct(times: Mapping[str, JobTimes], submit: Mapping[str, float]) -> float:
    ends = [t.end - submit[j] for j, t in times.items() if not is_sample(j)]
    return sum(ends) / len(ends) if ends else math.nan


def _same_kind(theirs: JobTimes, ours: JobTimes) -> bool:
    return theirs.kind in (ours.kind, EITHER)


def compare_method(policy: str, theirs: Mapping[str, JobTimes], ours: Mapping[str, JobTimes],
                   submit: Mapping[str, float], tolerance: float = TOLERANCE_UNITS) -> MethodComparison:
    """Per method: both average JCTs (over each side's jobs), the shares of the jobs both ran whose end, start
    and kind match, and the first job in their start order whose start or kind differs (then its end); and,
    profiling samples included (when both sides list them), the first whose start or end differs, by the
    earlier of the two starts: the decision where the two first part."""
    common = set(theirs) & set(ours)
    both = sorted((j for j in common if not is_sample(j)), key=lambda j: (theirs[j].start, theirs[j].end, j))

    def close(a: float, b: float) -> bool:
        return abs(a - b) <= tolerance

    every = sorted(common, key=lambda j: (min(theirs[j].start, ours[j].start), theirs[j].end, j))
    first_any = next((j for j in every if not close(theirs[j].start, ours[j].start)
                      or not close(theirs[j].end, ours[j].end)), None)

    n = len(both)
    ends = sum(close(theirs[j].end, ours[j].end) for j in both)
    starts = sum(close(theirs[j].start, ours[j].start) for j in both)
    kinds = sum(_same_kind(theirs[j], ours[j]) for j in both)
    first = next((j for j in both if not close(theirs[j].start, ours[j].start) or not _same_kind(theirs[j], ours[j])),
                 None) or next((j for j in both if not close(theirs[j].end, ours[j].end)), None)
    return MethodComparison(policy, _mean_jct(theirs, submit), _mean_jct(ours, submit), n,
                            ends / n if n else math.nan, starts / n if n else math.nan, kinds / n if n else math.nan,
                            (first, theirs[first], ours[first]) if first is not None else None,
                            first_any=(first_any, theirs[first_any], ours[first_any]) if first_any is not None
                            else None)


def compare(workers: int = 1, progress: bool = False) -> Comparison:
    """Run both simulators on the pack's input and compare them; `skipped` says why not when the pack or a JDK
    is missing (then nothing runs)."""
    peer = peer_dir()
    why = missing(peer)
    if why:
        return Comparison(skipped=why, peer=str(peer))
    methods = selected_methods()
    flags = switches()
    input_path = peer / "input" / INPUT_NAME
    jobs = authors_jobs(input_path, with_errors=True)
    by_number = {int(j.job_id.removeprefix("allox-")): j for j in jobs}
    submit = {j.job_id: j.submit_time / UNIT_S for j in jobs}
    overhead = 0.0 if NO_PROFILING in flags else DEFAULT_OVERHEAD  # their profiling off: ours too
    tasks = [(p, input_path, v, overhead) for p in methods for v in ("", AS_AUTHORS_SIM)[:1 + bool(options_of(p))]]
    runs = parallel_map(run_ours, tasks, workers, "allox: ours", progress)
    ours = {(p, v): r for (p, _, v, _), r in zip(tasks, runs, strict=True)}
    with tempfile.TemporaryDirectory(prefix="slurmx-allox-irfsim-") as work:
        csvs = run_authors_sim(peer, methods, Path(work), flags)
        theirs = {p: read_peer_csv(path, by_number, samples=True) for p, path in csvs.items()}
    out = []
    for p in methods:
        like_theirs = ours.get((p, AS_AUTHORS_SIM), ours[p, ""])
        m = compare_method(p, theirs[p], like_theirs, submit)
        default = compare_method(p, theirs[p], ours[p, ""], submit)
        out.append(replace(m, ours_default_jct=default.ours_jct, default_end_match=default.end_match,
                           options=options_of(p)))
    return Comparison(methods=tuple(out), peer=str(peer), switches=flags)


def _label(policy: str) -> str:
    return "AlloX" if policy == "allox" else policy.upper()


def _times(t: JobTimes) -> str:
    return f"{t.start:g}-{t.end:g} {t.kind}"


def tables(result: Comparison) -> list[ResultTable]:
    """The method table (both average JCTs and the match shares) and the first divergences."""
    if result.skipped:
        return []
    rows = tuple((_label(m.policy), f"{m.theirs_jct:,.1f}", f"{m.ours_default_jct:,.1f}",
                  f"{m.ours_jct:,.1f}" if m.options else "(no option)", ", ".join(m.options) or "-",
                  f"{100 * (m.ours_jct / m.theirs_jct - 1):+.1f}%", f"{m.default_end_match:.1%}", f"{m.end_match:.1%}",
                  f"{m.start_match:.1%}", f"{m.kind_match:.1%}") for m in result.methods)
    def line(first: tuple[str, JobTimes, JobTimes] | None) -> tuple[str, str, str]:
        return (first[0], _times(first[1]), _times(first[2])) if first is not None else ("none", "", "")

    first = tuple((_label(m.policy), *line(m.first), *line(m.first_any)) for m in result.methods)
    return [ResultTable(f"authors-sim: their simulator vs our engine, same input (match: within {TOLERANCE_UNITS:g} "
                        "unit; per job: ours with the options)",
                        ("method", "their avg JCT", "ours (defaults)", "ours (options on)", "options",
                         "ours (options) vs theirs", "end matches (defaults)", "end matches", "start matches",
                         "kind matches"), rows),
            ResultTable("authors-sim: first divergence (jobs: their start order; samples included: the earlier "
                        "start; start-end kind, in units)",
                        ("method", "job", "theirs", "ours", "job or sample", "theirs", "ours"), first)]


def as_data(result: Comparison) -> dict[str, object]:
    """The comparison for the JSON report: per method both average JCTs, the match shares, the first divergence."""
    if result.skipped:
        return {"skipped": result.skipped}
    return {"peer": result.peer, "switches": list(result.switches), "tolerance_units": TOLERANCE_UNITS,
            "methods": {m.policy: {"theirs_jct": m.theirs_jct, "ours_jct": m.ours_jct,
                                   "ours_default_jct": m.ours_default_jct,
                                   "default_end_match": m.default_end_match, "options": list(m.options), "jobs": m.jobs,
                                   "end_match": m.end_match, "start_match": m.start_match,
                                   "kind_match": m.kind_match,
                                   "first_divergence": None if m.first is None else
                                   {"job": m.first[0], "theirs": vars(m.first[1]), "ours": vars(m.first[2])},
                                   "first_divergence_with_samples": None if m.first_any is None else
                                   {"job": m.first_any[0], "theirs": vars(m.first_any[1]),
                                    "ours": vars(m.first_any[2])}}
                        for m in result.methods}}
