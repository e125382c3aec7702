"""`-o`/`-e` file name patterns per variant: each variant is a job of its own, so each writes its own file.

Slurm expands the pattern of each variant job (sbatch(1) "filename pattern": `%%`, `%A`, `%a`, `%b`, `%J`, `%j`,
`%N`, `%n`, `%s`, `%t`, `%u`, `%x`, each with an optional width such as `%4j`). A pattern with a token that differs
between the variants (`%j`, `%J`, `%A` and `%x`: the job id, and the name `NAME@KIND`) is passed on as written. In
any other pattern (`out.log`, `%u.log`) the variants would share one file, and a losing variant that starts would
truncate the output of the one doing the work: the kind goes before the file's suffix (`out.gpu.log`), and the
note printed at submission names each file. Under `--array` (one group per index) `%a` is the group's index,
written in by slurmx: Slurm would expand it to 4294967294 in a job that is not an array task.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["output_note", "per_variant"]

_TOKEN = re.compile(r"%(%|[0-9]*[A-Za-z])")
_PER_JOB = frozenset("jJAx")


def _distinguishes(pattern: str) -> bool:
    return any(match[1][-1] in _PER_JOB for match in _TOKEN.finditer(pattern) if match[1] != "%")


def per_variant(pattern: str, kind: str, array_index: str | None = None) -> str:
    """The file name pattern variant `kind` gets for the user's `pattern`."""
    if array_index is not None:
        def index(match: re.Match[str]) -> str:
            token = match[1]
            if token[-1] != "a":
                return match[0]
            width = token[:-1]
            return array_index.zfill(int(width)) if width.isdigit() and int(width) < 11 else array_index
        pattern = _TOKEN.sub(index, pattern)
    if _distinguishes(pattern):
        return pattern
    folder, slash, name = pattern.rpartition("/")
    stem, dot, suffix = name.rpartition(".")
    own = f"{stem}.{kind}.{suffix}" if dot and stem else f"{name}.{kind}"
    return f"{folder}{slash}{own}"


def output_note(option: str, pattern: str, kinds: Sequence[str]) -> str | None:
    """What `slurmx submit` says about `--output`/`--error` PATTERN when the variants cannot share it; None when
    the pattern is passed on as written."""
    if _distinguishes(pattern):
        return None
    files = ", ".join(f"{per_variant(pattern, kind)} ({kind})" for kind in kinds)
    return (f"--{option}={pattern}: each variant is a job of its own and writes its own file: {files}; the job's "
            "output is in the file of the variant that ran")
