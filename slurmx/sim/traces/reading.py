"""Why the bytes of a trace could not be read (gzip damage, not UTF-8, an I/O error), as one `TraceError`.

Loaders read through a buffered text stream, so the line it was on when decoding failed is not where the damage
is; on failure the file is read again as raw bytes, once, to name the exact line. Valid traces never pay for it.
"""

from __future__ import annotations

import codecs
import gzip
import zlib
from pathlib import Path

from slurmx.sim.traces.errors import TraceError

__all__ = ["READ_ERRORS", "read_failure"]

# What reading a plain or gzipped text file can raise (gzip.BadGzipFile is an OSError; EOFError is a cut gzip).
READ_ERRORS = (UnicodeDecodeError, EOFError, zlib.error, OSError)
_CHUNK = 1 << 16
_AGAIN = "; download or compress the file again"


def read_failure(path: str | Path, exc: BaseException) -> TraceError:
    """The `TraceError` for a failure `exc` met while reading `path`, naming the line where the bytes go bad."""
    found = _locate(Path(path))
    if found is not None:
        line, problem = found
        return TraceError(path, problem, line=line)
    return TraceError(path, _describe(exc))


def _describe(exc: BaseException) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text ({exc.reason}); save the file as UTF-8"
    if isinstance(exc, EOFError):
        return f"the gzip data is cut short (truncated file){_AGAIN}"
    if isinstance(exc, gzip.BadGzipFile):
        if str(exc).startswith("Not a gzipped file"):
            return "not gzip data although the name ends in .gz; compress it with gzip or drop .gz from its name"
        return f"the gzip data is damaged ({exc}){_AGAIN}"
    if isinstance(exc, zlib.error):
        return f"the gzip data is damaged ({exc}){_AGAIN}"
    if isinstance(exc, OSError):
        return f"cannot read: {exc.strerror or exc}"
    return f"cannot read: {exc}"


def _locate(path: Path) -> tuple[int, str] | None:
    """Read `path` again as bytes: the 1-based line where decoding or decompression fails, and what failed."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    line = 1
    try:
        with gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb") as fh:
            while True:
                chunk = fh.read1(_CHUNK)  # one raw read: data before a damaged spot is counted
                try:
                    decoder.decode(chunk, final=not chunk)
                except UnicodeDecodeError as exc:
                    data = exc.object  # bytes held back from the last chunk (no newline among them) + this chunk
                    line += data[: exc.start].count(b"\n")
                    column = exc.start - data.rfind(b"\n", 0, exc.start)
                    byte = data[exc.start]
                    return line, f"byte 0x{byte:02x} at character {column} is not UTF-8; save the file as UTF-8"
                if not chunk:
                    return None
                line += chunk.count(b"\n")
    except EOFError:
        return line, f"the gzip data is cut short after {line - 1} complete lines (truncated file){_AGAIN}"
    except (zlib.error, gzip.BadGzipFile) as exc:
        return line, _describe(exc)
    except OSError:
        return None  # not about the bytes (permissions, a folder): said without a line
