"""Where command output goes: paths checked before the work starts (a run of minutes must not end by failing to
write its result), and consoles that do not cut tables to 80 columns when the output is piped.

Each check names the flag, the path and the fix on one line. Writability is probed with a temporary file, not
`os.access`, which says yes to root on filesystems that refuse every write (`/proc`, read-only mounts).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from pathlib import Path

import click
from rich.console import Console

__all__ = ["checked_output_dir", "checked_output_file", "checked_plot_dir", "console"]

PIPED_WIDTH = 200  # rich assumes 80 columns off a terminal, which folds every table of `sim`, `reproduce`, `status`


def console(stderr: bool = False) -> Console:
    """A console for tables: the terminal's width, or PIPED_WIDTH when the stream is a pipe or a file."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr) if stream.isatty() else Console(stderr=stderr, width=PIPED_WIDTH)


def checked_output_file(path: str | Path, flag: str) -> Path:
    """`path` as a file to be written: its folder exists and takes writes, and it is not itself a folder."""
    out = Path(path)
    where = f"{flag} {path}"
    if os.path.isdir(out):
        raise click.ClickException(f"{where}: is a folder; name a file, e.g. {out / 'result.json'}")
    folder = out.parent
    if not os.path.isdir(folder):
        what = "is not a folder" if os.path.lexists(folder) else "does not exist"
        raise click.ClickException(f"{where}: {folder} {what}; create the folder or pass another path")
    _probe(folder, where)
    if os.path.lexists(out) and not os.access(out, os.W_OK):
        raise click.ClickException(f"{where}: the file is read-only; pass another path or make it writable")
    return out


def checked_output_dir(path: str | Path, flag: str) -> Path:
    """`path` as a folder to be created (with its parents) and filled: nothing in the way, and writable."""
    out = Path(path)
    where = f"{flag} {path}"
    existing = out
    while not os.path.lexists(existing) and existing != existing.parent:
        existing = existing.parent
    if not os.path.isdir(existing):
        raise click.ClickException(f"{where}: {existing} is a file, not a folder; pass a folder path")
    _probe(existing, where)
    return out


def checked_plot_dir(path: str | Path, flag: str = "--plot") -> Path:
    """`checked_output_dir` for plots, and matplotlib installed: checked before the work, not after a long run."""
    if importlib.util.find_spec("matplotlib") is None:
        raise click.ClickException(f"{flag} {path}: plots need matplotlib, which is not installed: "
                                   "pip install 'slurmx-hpc[plot]' (or leave out --plot)")
    return checked_output_dir(path, flag)


def _probe(folder: Path, where: str) -> None:
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise click.ClickException(f"{where}: cannot write in {folder} ({exc.strerror or exc}); pass a path in a "
                                   "folder you can write to") from None
