"""Render one batch script per variant from the jinja2 templates.

Every value that lands in a script goes through `shlex.quote` (the `sh` filter) or is validated to a safe
alphabet first; the payload travels in a quoted here-document, so nothing in it is expanded by the wrapper.
`#SBATCH` options come out in one canonical order, so a rendered script is byte-stable for the same input.
"""

from __future__ import annotations

import hashlib
import math
import re
import shlex
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import jinja2

from slurmx.core import tag
from slurmx.core.config import SiteConfig
from slurmx.core.model import JobClass
from slurmx.core.spool import group_spool
from slurmx.core.units import format_duration
from slurmx.core.validation import ConfigError
from slurmx.profile.sampling import search_kind
from slurmx.submit.begin import begin_at
from slurmx.submit.directives import canonical_long_option, release_refusal, short_option
from slurmx.submit.output import per_variant
from slurmx.submit.placement import check_constraint, kind_constraint
from slurmx.submit.signals import grace_signal_clash, parse_signal
from slurmx.submit.spec import JobSpec, gpu_gres, gres_with_gpus

__all__ = ["RenderedVariant", "payload_hash", "render_variant", "variant_options"]

_SAFE_OPTION = re.compile(r"^--?[A-Za-z][\w-]*(=[^\s'\"\\`$;&|<>(){}]*)?$")


@dataclass(frozen=True, slots=True)
class RenderedVariant:
    """One variant ready for sbatch: its kind, its full script, and the options its `#SBATCH` lines carry."""

    kind: str
    script: str
    options: tuple[str, ...]
    sample_script: str | None = None  # the profile-template script of this variant's samples
    search_script: str | None = None  # the sensitivity-template script of its CPU search (Synergy's kind only)


def payload_hash(spec: JobSpec, kind: str, source: str = "<spec>") -> str:
    """The `h=` tag: what makes two runs the same job for history (the payload and its arguments, not the group)."""
    return tag.script_hash("\0".join((_payload(spec, kind, source), *spec.args)))


def variant_options(spec: JobSpec, site: SiteConfig, kind: str, group_id: str, mode: str,
                    source: str = "<spec>", sample_hash: str | None = None,
                    sample: bool = False) -> tuple[str, ...]:
    """The sbatch options of one variant, in canonical order; each is checked to be safe in an `#SBATCH` line.

    The comment carries the profiler's tags: `n=` the spec's work (steps), `h=` the payload hash (the history key)
    and `p=` the hash of the variant's sample script (slurmxd submits only a script whose hash matches).
    """
    cfg = site.kind(kind)
    nodes, ntasks, per_node = (spec.variant_field(kind, name) for name in ("nodes", "ntasks", "ntasks_per_node"))
    tasks = ntasks is not None or per_node is not None
    # With tasks and no CPU count, one CPU per task (sbatch's default); the kind's CPUs are a one-task variant's.
    cpus = spec.variant_field(kind, "cpus") or (1 if tasks else cfg.cpus)
    # `--mem` is per node: --mem-per-cpu times the CPUs of the tasks on one node, where the counts say how many; else
    # --mem-per-cpu itself, as sbatch takes it.
    on_node = per_node or (-(-ntasks // nodes) if ntasks is not None and nodes is not None else None) or \
        (1 if ntasks in (None, 1) else None)
    own_mem = spec.variant_field(kind, "mem_mb")
    mem_mb = own_mem or (spec.mem_per_cpu_mb * cpus * on_node if spec.mem_per_cpu_mb and on_node else
                         None if spec.mem_per_cpu_mb else cfg.mem_mb)
    gres = spec.variant_field(kind, "gres") or cfg.gres
    if spec.gpus is not None and not (spec.overrides.get(kind) and spec.overrides[kind].gres):
        if gpu_gres(cfg.gres) is None:
            raise ConfigError([f"{source}: gpus: {spec.gpus} asks for GPUs, which kind {kind} has none of; choose "
                               "kinds with GPUs or leave gpus out"])
        gres = gres_with_gpus(cfg.gres or "", spec.gpus)
    time_s = spec.variant_field(kind, "time_s") or cfg.time_s
    options = [
        f"--job-name={spec.name}@{kind}",
        f"--partition={cfg.partition}",
        f"--qos={site.qos_for(spec.job_class)}",
        f"--cpus-per-task={cpus}",
        f"--mem={mem_mb}M" if mem_mb is not None else f"--mem-per-cpu={spec.mem_per_cpu_mb}M",
    ]
    if gres:
        options.append(f"--gres={gres}")
    if time_s:
        options.append(f"--time={format_duration(time_s)}")
    options += _layout(spec, kind, nodes, ntasks, per_node)
    site_flags, constraint = _constraint(spec, site, kind, source)
    if constraint:
        options.append(f"--constraint={constraint}")
    # Slurm opens the output file before the script runs: it goes into the group folder, which `slurmx submit`
    # created owner-only before the first sbatch (never the shared spool root, where another user could plant it).
    # The user's `-o`/`-e` pattern is the user's own path, as with sbatch; each variant gets its own file. A
    # profiling sample (`sample`) is slurmx's, not the job's: its output stays in the group folder.
    index = spec.env.get("SLURM_ARRAY_TASK_ID")  # one group per --array index (submitter.array_specs)
    options.append("--output=" + (per_variant(spec.output, kind, index) if spec.output and not sample
                                  else f"{group_spool(site, group_id)}/{kind}-%j.out"))
    if spec.error and not sample:
        options.append("--error=" + per_variant(spec.error, kind, index))
    # What slurmxd needs of the spec rides along in the group tag (`core.tag`): the job's own grace period, the
    # runtime estimate, the work in steps, the payload and sample-script hashes. Hints, like the whole comment.
    grace = spec.grace_s if spec.grace_s is not None else site.preemption.grace_s
    be = spec.job_class == JobClass.BE
    if be and time_s and grace >= time_s:
        raise ConfigError([_grace_error(spec, site, kind, grace, time_s, source)])
    steps = round(spec.work) if spec.work is not None and round(spec.work) >= 1 else None
    begin = _managed_begin(spec, source) if mode == "managed" and not sample else None
    options.append("--comment=" + tag.encode(tag.GroupTag(
        group_id, kind, spec.job_class.value, grace_s=grace if be else None, estimate_s=spec.estimates.get(kind),
        steps=steps, payload_hash=payload_hash(spec, kind, source), sample_hash=sample_hash or "",
        lease_s=site.daemon.lease_s if mode == "managed" else None, begin=begin[0] if begin else None)))
    user_signal = parse_signal(spec.signal).name if spec.signal is not None else None
    if user_signal is not None and user_signal == site.preemption.signal:
        raise ConfigError([f"{source}: signal: {spec.signal}: {grace_signal_clash(user_signal)}"])
    if be:
        options += [f"--signal=B:{site.preemption.signal}@{grace}", "--requeue"]
    else:
        options.append("--no-requeue")
    if mode == "managed":  # slurmxd's to start until the lease runs out (daemon/lease.py), then Slurm's
        # The user's --begin rides in the tag (b=): slurmxd starts nothing and sets no begin time before it, and
        # without slurmxd Slurm starts the group once both the lease and the user's time have passed.
        options.append(f"--begin=now+{max(site.daemon.lease_s, begin[1]) if begin else site.daemon.lease_s}")
    elif spec.begin is not None and not sample:  # race and pick: Slurm holds every variant until then
        options.append(f"--begin={spec.begin}")
    if spec.export is not None:  # the same on every variant; the script needs nothing from it (_tool_path)
        options.append(f"--export={spec.export}")
    if spec.dependency:  # in Slurm's terms once submitted (submitter.with_resolved_dependency); slurmxd waits too
        options.append(f"--dependency={spec.dependency}")
    options += site_flags
    overrides = spec.overrides.get(kind)
    own = spec.sbatch + (overrides.sbatch if overrides is not None else ())
    _check_release(own, site.cluster.slurm_version, source)
    # A profiling sample is slurmx's measurement, not the job: it never mails (the variant that runs does).
    options += [flag for flag in own if not (sample and _is_mail_option(flag))]
    for option in options:
        if option == f"--constraint={constraint}":
            continue  # checked by check_constraint: features and & | , ( ) [ ], which sbatch reads as one word
        if not _SAFE_OPTION.fullmatch(option):
            raise ConfigError([f"{source}: sbatch option {option!r} holds characters slurmx will not put in an "
                               "#SBATCH line (spaces, quotes, shell metacharacters); simplify the value"])
    return tuple(options)


def _managed_begin(spec: JobSpec, source: str) -> tuple[int, int] | None:
    """The user's `--begin` of a managed group as (Unix seconds for the tag, seconds from now for sbatch); None
    when none was asked or it has passed. Refused in one line beyond a year ahead (`tag.MAX_BEGIN_AHEAD_S`)."""
    if spec.begin is None:
        return None
    now = time.time()
    try:
        at = begin_at(spec.begin, now)
    except ValueError as exc:
        raise ConfigError([f"{source}: {exc}"]) from None
    ahead = math.ceil(round(at - now, 3))  # whole seconds, never before the user's time: now+7200 stays 7200
    if ahead > tag.MAX_BEGIN_AHEAD_S:
        raise ConfigError([f"{source}: --begin={spec.begin} is more than a year ahead; give a time within "
                           f"{tag.MAX_BEGIN_AHEAD_S // 86400} days, or submit nearer to it"])
    # The tag's time to the whole second down, as Slurm keeps `now+<s>` (sbatch's whole second plus <s>), so the
    # begin time Slurm sets is never before it.
    return (math.floor(at), ahead) if ahead > 0 else None


def _is_mail_option(flag: str) -> bool:
    """`--mail-type=…`/`--mail-user=…`, or an unambiguous prefix of either (sbatch accepts `--mail-t=END`)."""
    name = flag.partition("=")[0]
    return name.startswith("--") and canonical_long_option(name[2:]) in ("mail-type", "mail-user")


def _layout(spec: JobSpec, kind: str, nodes: int | None, ntasks: int | None, per_node: int | None) -> list[str]:
    """Node and task counts and the nodes the variant may take, as sbatch options (srun inside runs on them)."""
    options = [f"--{name}={value}" for name, value in (("nodes", nodes), ("ntasks", ntasks),
                                                       ("ntasks-per-node", per_node)) if value is not None]
    for field, option in (("nodelist", "--nodelist"), ("exclude", "--exclude")):
        value = spec.variant_field(kind, field)
        if value:
            options.append(f"{option}={value}")
    if spec.variant_field(kind, "exclusive"):
        options.append("--exclusive")
    return options


def _constraint(spec: JobSpec, site: SiteConfig, kind: str, source: str) -> tuple[list[str], str | None]:
    """(the kind's extra flags, the variant's constraint): a user's constraint and one the site gives the kind are
    both needed (sbatch keeps only the last `--constraint`), so they become one."""
    user = spec.variant_field(kind, "constraint")
    flags = list(site.kind(kind).extra_flags)
    own = kind_constraint(site, kind)
    if not user or own is None:
        return flags, user
    flags = [f for f in flags if not f.startswith(("--constraint=", "-C"))]
    try:
        return flags, check_constraint(f"{_operand(own)}&{_operand(user)}")
    except ValueError as exc:
        raise ConfigError([f"{source}: site resources.{kind}.extra_flags {own!r} and the job's constraint "
                           f"{user!r} cannot be joined in Slurm's grammar ({exc}); write the job's with no "
                           "brackets, or as one bracketed or-list"]) from None


def _operand(expr: str) -> str:
    """`expr` as one operand of `&`: as is when it has no `|` outside brackets (& binds before |) or is one bracket
    already; in brackets otherwise (Slurm reads one level of them: a bracket inside is refused by the caller)."""
    depth = 0
    bare_or = False
    for char in expr:
        if char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
        elif char == "|" and depth == 0:
            bare_or = True
    return f"({expr})" if bare_or else expr


def _check_release(flags: Sequence[str], release: str | None, source: str) -> None:
    """A spec's `sbatch:` options against the site's Slurm release (scripts' are checked where they are read)."""
    for flag in flags:
        given, eq, value = flag.partition("=")
        name = canonical_long_option(given[2:]) if given.startswith("--") else short_option(given[1:2])
        problem = release_refusal(name or "", value if eq else None, release)
        if problem is not None:
            raise ConfigError([f"{source}: sbatch: {problem}"])


def _grace_error(spec: JobSpec, site: SiteConfig, kind: str, grace: int, time_s: int, source: str) -> str:
    """The grace signal comes `grace` seconds before the time limit: one at least as long comes at the start."""
    override = spec.overrides.get(kind)
    if override is not None and override.time_s:
        time_key = f"overrides.{kind}.time"
    elif spec.time_s:
        time_key = "time"
    else:
        time_key = f"the site's resources.{kind}.time"
    grace_key = "grace" if spec.grace_s is not None else "the site's preemption.grace"
    fix = "shorten grace: or raise time:" if spec.grace_s is not None else "set a shorter grace: or raise time:"
    return (f"{source}: {grace_key} ({format_duration(grace)}) must be shorter than {time_key} "
            f"({format_duration(time_s)}) of variant {kind}, or the grace signal comes at once; {fix}")


# What the wrapper itself runs besides bash's builtins: Slurm's commands, python3 (profiling samples), coreutils.
_WRAPPER_TOOLS = ("squeue", "scancel", "python3", "stat", "awk", "mkdir")


def _tool_path(export: str | None) -> str | None:
    """Under an `--export` that leaves the submitting environment behind (NONE, NIL, a list without ALL), the
    folders where this host finds the wrapper's tools, for the script to append to whatever PATH the node gives
    (None when the whole environment travels: nothing to add)."""
    if export is None or export.split(",")[0] == "ALL":
        return None
    folders: list[str] = []
    for tool in _WRAPPER_TOOLS:
        found = shutil.which(tool)
        folder = str(Path(found).parent) if found else None
        if folder is not None and folder not in folders and ":" not in folder:
            folders.append(folder)
    return ":".join(folders or ["/usr/local/bin", "/usr/bin", "/bin"])


def _environment(templates_dir: Path | None) -> jinja2.Environment:
    loaders: list[jinja2.BaseLoader] = []
    if templates_dir is not None:
        loaders.append(jinja2.FileSystemLoader(str(templates_dir)))
    loaders.append(jinja2.PackageLoader("slurmx", "templates"))
    env = jinja2.Environment(loader=jinja2.ChoiceLoader(loaders), undefined=jinja2.StrictUndefined,
                             autoescape=False, keep_trailing_newline=True)
    env.filters["sh"] = lambda value: shlex.quote(str(value))
    return env


_SAMPLE_HOOKS = frozenset({"search.py", "sample.py"})  # run by profiling samples only (profile, sensitivity)


def _hook_files() -> tuple[str, list[tuple[str, str]]]:
    """The bash hook's text and the Python hook modules, read from the installed package."""
    hooks = resources.files("slurmx.hooks")
    bash = hooks.joinpath("hook.sh").read_text(encoding="utf-8")
    python = sorted((entry.name, entry.read_text(encoding="utf-8")) for entry in hooks.iterdir()
                    if entry.name.endswith(".py"))
    return bash, python


def _delimiter(*texts: str) -> str:
    """A here-document delimiter that occurs in none of the texts (derived from them: byte-stable)."""
    digest = hashlib.sha256("\0".join(texts).encode()).hexdigest()
    for width in range(12, len(digest) + 1, 4):
        candidate = f"SLURMX_EOF_{digest[:width]}"
        if not any(candidate in text for text in texts):
            return candidate
    raise ConfigError(["<spec>: payload contains every candidate here-document delimiter"])  # pragma: no cover


def _payload(spec: JobSpec, kind: str, source: str) -> str:
    # A variant's own payload (either kind) replaces the spec's: `overrides.gpu.command` beside a top-level
    # `script:` runs the command on the gpu variant.
    override = spec.overrides.get(kind)
    owner = override if override is not None and (override.script or override.command) is not None else spec
    script, command = owner.script, owner.command
    if script is not None:
        text = str(script)
    elif command is not None:
        text = f"#!/bin/bash\n{command}"
    else:
        raise ConfigError([f"{source}: variant {kind} has no payload; set 'command' or 'script' "
                           f"(at the top or in overrides.{kind})"])
    if not text.startswith("#!"):
        text = "#!/bin/bash\n" + text
    # The here-document that carries the payload ends its last line: drop that one newline, keep any others.
    return text.removesuffix("\n")


def render_variant(spec: JobSpec, site: SiteConfig, kind: str, group_id: str, mode: str,
                   source: str = "<spec>", profile_steps: int | None = None,
                   sample_hash: str | None = None, search: bool = False, array: bool = False) -> RenderedVariant:
    """The full batch script of one variant (the profile template when `profile_steps` is set, the sensitivity
    template, which runs Synergy's CPU search inside the job, when `search` is set too). `array`: the script of a
    kind's Slurm job array (issue 32), whose guard takes index i of the other kinds' arrays as its siblings."""
    options = variant_options(spec, site, kind, group_id, mode, source, sample_hash, sample=bool(profile_steps))
    cfg = site.kind(kind)
    template_name = ("sensitivity.sh.j2" if search else "profile.sh.j2") if profile_steps else \
        (cfg.template or f"{kind}.sh.j2")
    env = _environment(site.submit.templates_dir)
    try:
        template = env.get_template(template_name)
    except jinja2.TemplateNotFound:
        if cfg.template and not profile_steps:  # named in the site config: a typo, not a kind without one
            raise ConfigError([f"site resources.{kind}.template: {cfg.template!r} does not exist in "
                               f"{site.submit.templates_dir or 'the packaged templates'}; fix the name or add the "
                               "file (slurmx config check lists every such problem)"]) from None
        template = env.get_template("_base.sh.j2")  # a site kind without its own template
    hook_sh, hook_py = _hook_files()
    # slurmctld keeps every job's script: the sample-only hook modules go into sample scripts only.
    needed = {"search.py", "sample.py"} if search else {"sample.py"} if profile_steps else set()
    hook_py = [(name, text) for name, text in hook_py if name not in _SAMPLE_HOOKS or name in needed]
    payload = _payload(spec, kind, source)
    env_vars = dict(spec.env)
    overrides = spec.overrides.get(kind)
    if overrides is not None:
        env_vars.update(overrides.env)
    modules = spec.modules + (overrides.modules if overrides is not None else ())
    spool = group_spool(site, group_id)
    grace = spec.grace_s if spec.grace_s is not None else site.preemption.grace_s
    try:
        script = template.render(
            options=options, group_id=group_id, kind=kind, job_class=spec.job_class.value,
            spool_dir=spool, checkpoint_dir=spec.checkpoint_dir or f"{spool}/checkpoint",
            signal=site.preemption.signal, grace_s=grace, requeue_exit_code=site.preemption.requeue_exit_code,
            on_signal=site.preemption.on_signal, work=spec.work, hook_sh=hook_sh.rstrip("\n"),
            hook_py=[(n, t.rstrip("\n")) for n, t in hook_py], mode=mode,
            race_settle_s=site.submit.race_settle_s, modules=modules, env=sorted(env_vars.items()),
            payload=payload, delimiter=_delimiter(payload, hook_sh, *(t for _, t in hook_py)),
            workdir=spec.workdir, args=list(spec.args), profile_steps=profile_steps,
            export=spec.export, tool_path=_tool_path(spec.export),
            user_signal=parse_signal(spec.signal) if spec.signal is not None else None, array=array,
        )
    except jinja2.TemplateError as exc:
        raise ConfigError([f"template {template_name}: {exc}"]) from None
    return RenderedVariant(kind, script, options)


def render_with_sample(spec: JobSpec, site: SiteConfig, kind: str, group_id: str, mode: str,
                       source: str = "<spec>", array: bool = False) -> RenderedVariant:
    """A managed variant with its sample script (when the spec declares its `work` in steps, which samples need).

    The sample is the profile template in `pick` mode (not held); slurmxd overrides its QOS, name, comment and
    step count on the sbatch command line. slurmxd submits it from its own working directory: a payload that
    needs another one sets the spec's `workdir`.
    """
    if mode != "managed" or spec.work is None or round(spec.work) < 1:
        return render_variant(spec, site, kind, group_id, mode, source, array=array)
    if array:
        raise ValueError("a managed variant with profiling samples is never a Slurm array (as_slurm_arrays)")
    sample = render_variant(spec, site, kind, group_id, "pick", source, profile_steps=1).script
    main = render_variant(spec, site, kind, group_id, mode, source, sample_hash=tag.script_hash(sample))
    search = render_variant(spec, site, kind, group_id, "pick", source, profile_steps=1, search=True).script \
        if kind == search_kind(site) else None
    return RenderedVariant(main.kind, main.script, main.options, sample, search)


def render_group(spec: JobSpec, site: SiteConfig, kinds: Sequence[str], group_id: str, mode: str,
                 source: str = "<spec>") -> list[RenderedVariant]:
    return [render_variant(spec, site, kind, group_id, mode, source) for kind in kinds]
