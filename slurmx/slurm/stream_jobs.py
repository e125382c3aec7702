"""`squeue --json` read as it arrives: job records decoded a run at a time, the answer never held whole.

Why: at 100,000 pending groups squeue's answer is about 1 GB; held whole while it is decoded, it was two thirds of
the daemon's peak memory (bench/daemon_cycle.py). Slurm 24.11 and 26.05 open the answer with its `jobs` array;
each record there starts with the same first key. Between two records the bytes are `}` `,` `{` `"<that key>"`
(whitespace allowed): inside a JSON string a quote is always escaped, so this can only be a real boundary or a
nested object that also starts with that key; a cut at a nested one leaves unbalanced brackets, which the decoder
refuses. A run of records between two boundaries is decoded as a list on its own; the last record and what
follows the array (Slurm's `errors`, `warnings`) are decoded as a whole answer with one job.

An answer that does not open with `jobs` (22.05 writes `meta` first) is collected and read whole by `parse_jobs`;
a run the decoder refuses makes `finish` raise `NotStreamable` (the caller reads the answer again, whole);
`feed` never raises, so the command writing the answer is always read to its end.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import msgspec

from slurmx.slurm.errors import SlurmParseError
from slurmx.slurm.gcpause import collector_paused
from slurmx.slurm.parse import (
    _BAD_RECORD,
    _SQUEUE_DECODER,
    _all_jobs,
    _decode,
    _each,
    _flat,
    _jobs_of,
    _note_replaced,
    _raise_reported_errors,
    _SqueueJob,
    is_utf8,
    parse_jobs,
)
from slurmx.slurm.records import SlurmJob

__all__ = ["JobStream", "NotStreamable"]

_HEAD = re.compile(rb'\s*\{\s*"jobs"\s*:\s*\[\s*')
_FIRST_KEY = re.compile(rb'\{\s*("[a-z_]{1,64}")\s*:')
_BEFORE_KEY = re.compile(rb'\}\s*,\s*\{\s*\Z')
_RUN_BYTES = 8 << 20  # decode once this much is waiting: few decoder calls, little held
_LIST_DECODER = msgspec.json.Decoder(list[_SqueueJob])


class NotStreamable(Exception):
    """A run of records the stream cannot read on its own: read the answer again, whole."""


class JobStream:
    """Feed it squeue's stdout chunk by chunk (`feed`), then `finish()` for the jobs, in Slurm's order."""

    def __init__(self, argv: Sequence[str], run_bytes: int = _RUN_BYTES) -> None:
        self.argv = argv
        self._run_bytes = run_bytes
        self._buf = bytearray()
        self._key: bytes | None = None  # b'"account"': the first key of every record
        self._whole = False  # not the shape streamed: collect, read whole at the end
        self._jobs: list[SlurmJob] = []
        self._failed = False  # a run could not be read: the rest is skipped, `finish` says so

    def feed(self, chunk: bytes) -> None:
        if self._failed:
            return
        self._buf += chunk
        if self._whole:
            return
        if self._key is None and not self._start():
            return
        if len(self._buf) >= self._run_bytes:
            try:
                self._decode_runs()
            except NotStreamable:
                self._failed = True
                self._buf = bytearray()

    def finish(self) -> list[SlurmJob]:
        if self._failed:
            raise NotStreamable
        data = bytes(self._buf)
        self._buf = bytearray()
        if self._whole or self._key is None:
            return parse_jobs(data, self.argv)
        with collector_paused():
            try:  # the last record, the end of the array and the rest of the answer
                answer = _decode(_SQUEUE_DECODER.decode, b'{"jobs":' + data, self.argv)
            except msgspec.MsgspecError:
                raise NotStreamable from None
            _raise_reported_errors(answer.errors, self.argv)
            self._add(answer.jobs, data)
        return self._jobs

    def _start(self) -> bool:
        """Whether the answer opens with its jobs array and its first record's first key is here yet; if so the
        buffer is cut to `[` and the first record."""
        head = _HEAD.match(self._buf)
        if head is None:
            if len(self._buf) > 4096 or self._buf.lstrip()[:1] not in (bytearray(), bytearray(b"{")):
                self._whole = True
            return False
        key = _FIRST_KEY.match(self._buf, head.end())
        if key is None:
            if len(self._buf) - head.end() > 4096 or \
                    self._buf[head.end():head.end() + 1] not in (bytearray(), bytearray(b"{")):
                self._whole = True  # no job (an empty array), or not the shape expected
            return False
        self._key = key.group(1)
        self._buf[:head.end()] = b"["
        return True

    def _decode_runs(self) -> None:
        """Decode every whole record waiting, in place (the buffer holds `[` and the records: the byte after the
        last whole one becomes `]`); keep the last record (it may be cut) with what follows it."""
        assert self._key is not None
        buf = self._buf
        at = buf.rfind(self._key)
        while at > 0:
            window = buf.rfind(b"}", max(0, at - 256), at)
            if window >= 0 and _BEFORE_KEY.search(buf, window, at):
                break
            at = buf.rfind(self._key, 0, at)
        if at <= 0:
            return
        end = buf.rfind(b"}", 0, at) + 1  # the last whole record ends here; a `,` or a space follows
        start = buf.rfind(b"{", end, at)  # the next one starts here
        buf[end] = ord("]")
        with collector_paused(), memoryview(buf) as whole, whole[:end + 1] as run:
            try:
                records = _LIST_DECODER.decode(run)
            except (UnicodeError, msgspec.MsgspecError):
                if is_utf8(run):
                    raise NotStreamable from None
                try:  # not UTF-8: read as the transports read text
                    records = _decode(_LIST_DECODER.decode, bytes(run), self.argv)
                except msgspec.MsgspecError:
                    raise NotStreamable from None
            self._add(records, run)
        buf[start - 1] = ord("[")
        del buf[:start - 1]

    def _add(self, records: list[_SqueueJob], raw: bytes | memoryview) -> None:
        try:
            jobs = _all_jobs(records)
        except _BAD_RECORD:
            try:  # none of this run readable: whether none of the answer is, only the whole answer tells
                jobs = _flat(_each(records, _jobs_of, lambda job: f"job {job.job_id}", self.argv, "job"))
            except SlurmParseError:
                raise NotStreamable from None
        if any("\ufffd" in job.name or "\ufffd" in job.comment for job in jobs):
            _note_replaced(jobs, bytes(raw), self.argv)
        self._jobs += jobs
