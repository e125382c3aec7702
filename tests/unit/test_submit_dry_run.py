"""`slurmx submit --dry-run`: one header line of sbatch options per variant; the scripts only with --scripts.

Each script embeds the job-side hook (tens of KB), so printing them by default buried the options a user asked
to check. The demo keeps the lines starting with '# ----', so the header's start is part of the contract.
"""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from slurmx.cli.app import cli

REPO = Path(__file__).resolve().parents[2]
SITE = str(REPO / "site-config" / "test-cluster.yaml")
SPEC = str(REPO / "examples" / "hello.yaml")


def _submit(*flags: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--site", SITE, "submit", *flags, SPEC])
    return result.exit_code, result.output


def test_a_dry_run_prints_the_options_of_each_variant_and_no_script() -> None:
    code, out = _submit("--dry-run")
    assert code == 0, out
    lines = out.splitlines()
    assert [line.split(" variant ")[1].split()[0] for line in lines] == ["cpu", "gpu", "accel"]
    assert all(line.startswith("# ---- group hello-") for line in lines)
    assert "sbatch --job-name=hello@gpu --partition=gpu" in lines[1] and "--gres=gpu:1" in lines[1]
    assert "hello from the" not in out  # the spec's command lives in the script


def test_scripts_adds_each_whole_script_after_its_options() -> None:
    code, out = _submit("--dry-run", "--scripts")
    assert code == 0, out
    parts = out.split("# ---- group ")[1:]
    assert len(parts) == 3
    for kind, part in zip(("cpu", "gpu", "accel"), parts, strict=True):
        header, script = part.split("\n", 1)
        assert f"variant {kind} " in header
        assert script.startswith("#!") and f"#SBATCH --job-name=hello@{kind}" in script
        assert "hello from the $SLURMX_VARIANT variant" in script
    assert len(out) > 10 * len(_submit("--dry-run")[1])


def test_scripts_alone_is_refused_before_anything_is_submitted() -> None:
    code, out = _submit("--scripts")
    assert code == 2 and "--scripts shows what --dry-run would submit" in out
