"""The one error every trace loader raises: a single line naming the file, the place in it and what to fix."""

from __future__ import annotations

from pathlib import Path

__all__ = ["TraceError"]


class TraceError(ValueError):
    """A trace file that cannot be read. `str()` is one line: `<file>: row <n>: column <c>: <problem>`.

    Rows count physical lines from 1 (a CSV header is row 1); for the JSON Philly log the row is the job's
    position in the array. Damaged bytes (gzip, UTF-8) are placed by `line`, the physical line, instead.
    `path`, `row`, `line` and `column` are kept as attributes for callers that want them.
    """

    def __init__(
        self,
        path: str | Path,
        message: str,
        *,
        row: int | None = None,
        column: str | None = None,
        line: int | None = None,
    ) -> None:
        self.path, self.row, self.column, self.line = str(path), row, column, line
        self.message = " ".join(message.split())
        super().__init__(str(self))

    def __str__(self) -> str:
        where = "".join(
            [
                f": row {self.row}" if self.row is not None else "",
                f": line {self.line}" if self.line is not None else "",
                f": column {self.column}" if self.column else "",
            ]
        )
        path = self.path if self.path.isprintable() else repr(self.path)[1:-1]  # a newline in a name stays one line
        return f"{path}{where}: {self.message}"
