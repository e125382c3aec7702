"""The whole check of a site file: what `slurmx config check` reports and what slurmxd refuses to start with.

The site models (`slurmx.core.config`) find every structural problem at once. What they cannot see needs the
policy registry, the profiler's sampling model and the job templates, which `slurmx.core` cannot import (they
import it), so it is checked here: the policy exists and its parameters fit its arguments model, `profile.sampling`
fits `SamplingParams`, the profiling QOS is not a class's QOS, and every template a kind names exists and
compiles. Each section is checked on its own, so a broken `resources` does not hide an unknown policy: one run
lists every problem, one line each, `FILE: key.path: problem; fix`. The daemon runs the same check at start-up,
so a file `config check` accepts is a file slurmxd accepts.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import jinja2
from pydantic import BaseModel, ValidationError

from slurmx.core.config import (
    KIND_NAME,
    ClassesConfig,
    PolicyConfig,
    ProfileConfig,
    ResourceKindConfig,
    SiteConfig,
    SubmitConfig,
)
from slurmx.core.units import short_repr
from slurmx.core.validation import ConfigError, load_yaml, validation_messages
from slurmx.policies.base import available_policies, policy_args, policy_args_model
from slurmx.profile.sampling import SamplingParams

__all__ = ["check_site_data", "check_site_file", "load_checked_site", "site_json_schema", "site_problems",
           "template_environment"]

M = TypeVar("M", bound=BaseModel)
_MISSING_HINT = "pass --site PATH or set SLURMX_SITE"


def load_checked_site(path: str | Path) -> SiteConfig:
    """Read a site file and run every check; a `ConfigError` holds all problems. Its `str()` is the first, which
    says how many more there are, because a daemon's start-up failure is one line in a log."""
    site, problems = check_site_file(path)
    if site is None:
        more = f" (and {len(problems) - 1} more: `slurmx config check {path}` lists all)" if len(problems) > 1 else ""
        raise ConfigError([problems[0] + more, *problems[1:]])
    return site


def check_site_file(path: str | Path) -> tuple[SiteConfig | None, list[str]]:
    """(the site, []) when slurmxd and `slurmx submit` would accept the file, else (None, every problem)."""
    try:
        data = load_yaml(path, SiteConfig, _MISSING_HINT)
    except ConfigError as exc:
        return None, exc.errors
    problems = check_site_data(data, str(path))
    # Through ConfigError: one line each, however a quoted value was broken (\r, \x1e, U+2028 ...), and bounded.
    return (None, ConfigError(problems).errors) if problems else (SiteConfig.model_validate(dict(data)), [])


def check_site_data(data: Mapping[str, Any], source: str) -> list[str]:
    """Structural problems (all of pydantic's) followed by the semantic ones of each section that is valid alone."""
    if not isinstance(data, Mapping):
        return [f"{source}: expected a mapping of keys at top level, got {type(data).__name__}"]
    try:
        site = SiteConfig.model_validate(dict(data))
    except ValidationError as exc:
        problems = validation_messages(SiteConfig, exc, source)
    else:
        return site_problems(site, source)
    resources = data.get("resources")
    kinds = {name: kind for name, raw in resources.items()
             if isinstance(name, str) and (kind := _section(ResourceKindConfig, raw)) is not None} \
        if isinstance(resources, Mapping) else {}
    problems += _semantic(source, policy=_section(PolicyConfig, data.get("policy", {})),
                          profile=_section(ProfileConfig, data.get("profile", {})),
                          classes=_section(ClassesConfig, data.get("classes", {})),
                          submit=_section(SubmitConfig, data.get("submit", {})), kinds=kinds)
    return problems


def site_problems(site: SiteConfig, source: str) -> list[str]:
    """The semantic problems of an already valid site (what its models cannot see on their own)."""
    return _semantic(source, policy=site.policy, profile=site.profile, classes=site.classes, submit=site.submit,
                     kinds=site.resources)


def _section(model: type[M], raw: Any) -> M | None:
    """One section validated alone, or None when it has structural problems (already reported)."""
    if not isinstance(raw, Mapping):
        return None
    try:
        return model.model_validate(dict(raw))
    except ValidationError:
        return None


def _semantic(source: str, *, policy: PolicyConfig | None, profile: ProfileConfig | None,
              classes: ClassesConfig | None, submit: SubmitConfig | None,
              kinds: Mapping[str, ResourceKindConfig]) -> list[str]:
    problems: list[str] = []
    if policy is not None:
        try:
            policy_args(policy.name, policy.params, source, ("policy",))
        except ConfigError as exc:
            problems += exc.errors
    if profile is not None:
        problems += _profile_problems(profile, classes, source)
    if submit is not None:
        problems += _template_problems(kinds, submit, source)
    return problems


def _profile_problems(profile: ProfileConfig, classes: ClassesConfig | None, source: str) -> list[str]:
    """`profile.sampling` against `SamplingParams`, `profile.off_for` against the registry, and the QOSes."""
    problems: list[str] = []
    try:
        sampling = SamplingParams.model_validate(dict(profile.sampling))
    except ValidationError as exc:
        problems += validation_messages(SamplingParams, exc, source, ("profile", "sampling"))
        sampling = None
    known = available_policies()
    problems += [f"{source}: profile.off_for[{i}]: unknown policy {short_repr(name)}; available: {', '.join(known)}"
                 for i, name in enumerate(profile.off_for) if name not in known]
    if sampling is not None and classes is not None:
        for job_class, config in (("te", classes.te), ("be", classes.be)):
            if sampling.qos == config.qos:
                problems.append(f"{source}: profile.sampling.qos: {sampling.qos!r} is the {job_class} class's QOS; "
                                "give samples a QOS of their own (e.g. slurmx-profile), or samples count as jobs")
    return problems


def _template_problems(kinds: Mapping[str, ResourceKindConfig], submit: SubmitConfig, source: str) -> list[str]:
    """Each kind's template exists where `slurmx submit` looks (the site's directory, then slurmx's) and compiles.

    A kind's default `<kind>.sh.j2` may be missing: the base template serves it, as documented. A name the file
    gives is a promise, and without this check a typo in it silently became the base template.
    """
    problems: list[str] = []
    loaders: list[jinja2.BaseLoader] = []
    directory = submit.templates_dir
    if directory is not None:
        if _is_dir(directory):
            loaders.append(jinja2.FileSystemLoader(str(directory)))
        else:
            relative = "" if directory.is_absolute() else f" (relative to {Path.cwd()})"
            problems.append(f"{source}: submit.templates_dir: no directory {_shown(str(directory))}{relative}; "
                            "create it or remove the key")
    loaders.append(jinja2.PackageLoader("slurmx", "templates"))
    env = template_environment(loaders)
    for kind, config in kinds.items():
        name = config.template or f"{kind}.sh.j2"
        found, problem = _compiled(env, name)
        if problem is not None:
            problems.append(f"{source}: resources.{kind}.template: {problem}")
        elif not found and name != f"{kind}.sh.j2":
            where = f"{_shown(str(directory))} or slurmx's own" if len(loaders) > 1 else "slurmx's own"
            shown = ", ".join(t for t in env.list_templates() if t.endswith(".j2") and not t.startswith("_"))
            problems.append(f"{source}: resources.{kind}.template: no template {_shown(name)} in {where} templates "
                            f"({shown}); fix the name, add the file, or remove the key for the base template")
    if len(loaders) > 1:  # the site's directory may replace the templates every kind and every sample fall back on
        problems += [f"{source}: submit.templates_dir: {problem}" for name in ("_base.sh.j2", "profile.sh.j2")
                     if (problem := _compiled(env, name)[1]) is not None]
    return problems


def template_environment(loaders: list[jinja2.BaseLoader]) -> jinja2.Environment:
    """Where and how `slurmx.submit.render` finds templates, with its filters, so a template compiles here iff
    it compiles there (a unit test compares the filters)."""
    env = jinja2.Environment(loader=jinja2.ChoiceLoader(loaders), autoescape=False)
    env.filters["sh"] = shlex.quote
    return env


def _compiled(env: jinja2.Environment, name: str) -> tuple[bool, str | None]:
    """(found, problem): whether template `name` exists where `slurmx submit` looks, and why it does not compile."""
    try:
        env.get_template(name)
    except jinja2.TemplateNotFound:
        return False, None
    except jinja2.TemplateSyntaxError as exc:
        reason = (exc.message or "syntax error").split(". ")[0].rstrip(".")
        return True, f"{name} line {exc.lineno}: {reason}; fix the template"
    except (OSError, UnicodeDecodeError) as exc:
        return True, f"cannot read {_shown(name)}: {exc}; fix the file"
    return True, None


def _shown(text: str) -> str:
    """A path or name quoted whole (a path cut short is useless), unless it is absurdly long."""
    return repr(text) if len(text) <= 200 else short_repr(text)


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # a name too long, a loop of links: not a directory slurmx can use
        return False


def site_json_schema() -> dict[str, Any]:
    """JSON Schema of the site file, for editors: the site models, with `profile.sampling` as `SamplingParams`
    and `policy.params` as each registered policy's arguments (chosen by `policy.name`)."""
    schema = SiteConfig.model_json_schema(by_alias=True, mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "slurmx site config"
    defs: dict[str, Any] = schema.setdefault("$defs", {})
    sampling = _hoisted(SamplingParams, defs)
    defs["ProfileConfig"]["properties"]["sampling"] = {**sampling, "description": "profiler sample runs"}
    branches = []
    for name in available_policies():
        args = _hoisted(policy_args_model(name), defs)
        branches.append({"if": {"properties": {"name": {"const": name}}, "required": ["name"]},
                         "then": {"properties": {"params": args}}})
    defs["PolicyConfig"]["properties"]["name"]["enum"] = available_policies()
    schema["properties"]["resources"].update(minProperties=1, propertyNames={"pattern": KIND_NAME.pattern})
    # YAML reads an unquoted 24.11 as a number, which the loader accepts.
    defs["ClusterConfig"]["properties"]["slurm_version"]["anyOf"].append({"type": "number"})
    defs["PolicyConfig"]["allOf"] = branches
    return schema


def _hoisted(model: type[BaseModel], defs: dict[str, Any]) -> dict[str, Any]:
    """`model`'s schema, its own `$defs` moved into the root's so every `$ref` resolves from the root (renamed
    `<Model>.<Def>` where two policies' nested models share a name but not a shape)."""
    sub = model.model_json_schema(by_alias=True, mode="validation")
    own: dict[str, Any] = sub.pop("$defs", {})
    renames = {key: f"{model.__name__}.{key}" for key, value in own.items() if defs.get(key, value) != value}
    text = json.dumps({"schema": sub, "defs": own})
    for key, renamed in renames.items():
        text = text.replace(json.dumps(f"#/$defs/{key}"), json.dumps(f"#/$defs/{renamed}"))
    moved: dict[str, Any] = json.loads(text)
    for key, value in moved["defs"].items():
        defs[renames.get(key, key)] = value
    hoisted: dict[str, Any] = moved["schema"]
    return hoisted
