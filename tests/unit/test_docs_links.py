"""Every link and every repository path the docs name exists: a reader who follows one never lands nowhere."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
_PATH = re.compile(r"`((?:slurmx|docs|tests|bench|examples|site-config|docker-slurm)/[\w./-]+"
                   r"\.(?:py|md|yaml|sh|j2|lua|service))`")


def test_links_and_named_files_in_the_docs_exist() -> None:
    pages = [*ROOT.glob("docs/**/*.md"), ROOT / "README.md", *ROOT.glob("site-config/*.md"),
             *ROOT.glob("examples/**/*.md")]
    assert len(pages) > 10
    missing = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for target in _LINK.findall(text):
            if not target.startswith(("http://", "https://", "mailto:")) and not (page.parent / target).exists():
                missing.append(f"{page.relative_to(ROOT)}: link {target}")
        missing += [f"{page.relative_to(ROOT)}: path {p}" for p in _PATH.findall(text) if not (ROOT / p).exists()]
    assert not missing, "\n".join(missing)


def test_every_job_spec_key_is_documented() -> None:
    from slurmx.submit.spec import JobSpec, VariantOverride

    text = (ROOT / "docs" / "spec.md").read_text(encoding="utf-8")
    keys = {f.validation_alias or name for model in (JobSpec, VariantOverride)
            for name, f in model.model_fields.items() if not f.exclude}  # excluded: derived, never written
    assert not {k for k in keys if f"`{k}`" not in text}, "docs/spec.md misses these spec keys"
