#!/usr/bin/env python3
"""Rewrite the golden job scripts in this folder from the current templates.

    python3 tests/unit/golden/regenerate.py

Run it after an intended change to `slurmx/templates/` (or to what render.py passes them), then review the diff
with `git diff tests/unit/golden` before committing. tests/unit/test_render.py imports the fixed inputs below,
so the test and this script always render the same thing.

The embedded job-side hooks (slurmx/hooks/hook.sh and the Python modules) are replaced by short stand-ins: the
golden files pin the templates, not the hooks, which have tests of their own (test_hook_sh.py, test_hooks.py).
test_render.py checks separately that the real hooks are embedded verbatim.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any
from unittest import mock

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from slurmx.core.config import SiteConfig, parse_site_config  # noqa: E402
from slurmx.submit import render  # noqa: E402
from slurmx.submit.spec import JobSpec, parse_spec  # noqa: E402

GROUP_ID = "train-0a1b2c"
MODES = ("managed", "race", "pick")
TEMPLATES = ("cpu", "gpu", "accel", "profile")  # profile: the cpu variant rendered with profile_steps=5
PROFILE_KIND = "cpu"
PROFILE_STEPS = 5

SITE_DATA: dict[str, Any] = {
    "cluster": {"name": "golden"},
    "resources": {
        "cpu": {"partition": "cpu", "cpus": 2, "mem": "1G", "time": "2h", "extra_flags": ["--constraint=avx2"]},
        "gpu": {"partition": "gpu", "cpus": 1, "mem": "500M", "gres": "gpu:1"},
        "accel": {"partition": "accel", "cpus": 1, "mem": "500M", "gres": "accel:1",
                  "extra_flags": ["--exclusive"]},
    },
    "classes": {"te": {"qos": "te"}, "be": {"qos": "be"}},
    "preemption": {"signal": "USR2", "grace": "30s", "requeue_exit_code": 99},
    "submit": {"mode": "managed", "spool_dir": "/shared/spool", "race_settle": "2s"},
}

SPEC_DATA: dict[str, Any] = {
    "name": "train",
    "command": "python3 train.py --epochs 10",
    "args": ["--lr", "0.1", "two words", "$HOME;`id`"],
    "class": "be",
    "grace": "45s",
    "checkpoint_dir": "/shared/ckpt/train",
    "work": 1000,
    "env": {"DATA": "/scratch/data", "QUOTED": "it's \"quoted\" $(not run)"},
    "modules": ["gcc/12"],
    "workdir": "/shared/work dir",
    "sbatch": ["--account=proj"],
    "overrides": {
        "gpu": {"command": "python3 train.py --cuda", "cpus": 4, "mem": "16G", "gres": "gpu:2", "time": "1h",
                "env": {"CUDA_CACHE": "/tmp/cuda"}, "modules": ["cuda/12.2"], "sbatch": ["--gpu-bind=closest"]},
        "accel": {"script": "#!/bin/bash\nset -e\necho accel \"$@\"\nslurmx_progress 1 1\n"},
    },
}

HOOK_SH_STUB = "# <slurmx/hooks/hook.sh is embedded here>"
HOOK_PY_STUB = [("__init__.py", "# <slurmx/hooks/__init__.py>"), ("progress.py", "# <slurmx/hooks/progress.py>")]


def site() -> SiteConfig:
    return parse_site_config(SITE_DATA, "golden-site.yaml")


def spec() -> JobSpec:
    return parse_spec(SPEC_DATA, "golden-spec.yaml")


def render_case(template: str, mode: str) -> str:
    """The script one golden file holds: `template` is a kind, or 'profile'."""
    kind = PROFILE_KIND if template == "profile" else template
    steps = PROFILE_STEPS if template == "profile" else None
    with mock.patch.object(render, "_hook_files", return_value=(HOOK_SH_STUB, list(HOOK_PY_STUB))):
        return render.render_variant(spec(), site(), kind, GROUP_ID, mode, "golden-spec.yaml",
                                     profile_steps=steps).script


def golden_path(template: str, mode: str) -> Path:
    return HERE / f"{template}-{mode}.sh"


def cases() -> list[tuple[str, str]]:
    return [(template, mode) for template in TEMPLATES for mode in MODES]


def main() -> int:
    written = 0
    for template, mode in cases():
        path = golden_path(template, mode)
        text = render_case(template, mode)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            written += 1
            print(f"wrote {path.relative_to(ROOT)}")
    expected = {golden_path(t, m).name for t, m in cases()}
    for stale in sorted(p for p in HERE.glob("*.sh") if p.name not in expected):
        stale.unlink()
        print(f"removed {stale.relative_to(ROOT)}")
    print(f"{written} of {len(cases())} golden file(s) changed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
