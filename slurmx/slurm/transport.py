"""Transports: the one narrow seam through which slurmx runs Slurm commands.

`run(argv, stdin) -> CommandResult`. A transport never interprets output and never uses a shell on the
local side; the SSH transport quotes every argument for the remote shell.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import os
import selectors
import shlex
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from slurmx.slurm.errors import SlurmTimeout, TransportError

__all__ = [
    "CommandResult",
    "DockerExecTransport",
    "LocalTransport",
    "ReplayTransport",
    "SshTransport",
    "Transport",
]


class CommandResult:
    """What a command printed. `data` is its stdout as the bytes it wrote, `stdout` the same as text.

    Why both: a 10,000-job `squeue --json` is about 100 MB; the parsers decode `data` straight into typed records,
    and holding it as text as well would double the daemon's peak memory. `stdout` is decoded (leniently, see
    `_text`) only when asked for, so small commands and error messages read text as before.
    """

    __slots__ = ("_out", "argv", "returncode", "stderr")

    def __init__(self, argv: tuple[str, ...], returncode: int, stdout: str | bytes, stderr: str) -> None:
        self.argv, self.returncode, self._out, self.stderr = argv, returncode, stdout, stderr

    @property
    def data(self) -> bytes:
        return self._out if isinstance(self._out, bytes) else self._out.encode("utf-8", "surrogatepass")

    @property
    def stdout(self) -> str:
        return _text(self._out) if isinstance(self._out, bytes) else self._out

    @property
    def empty(self) -> bool:
        """Nothing on stdout, told without decoding it."""
        return not self._out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CommandResult):
            return NotImplemented
        return (self.argv, self.returncode, self.data, self.stderr) == \
            (other.argv, other.returncode, other.data, other.stderr)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"CommandResult({self.argv!r}, {self.returncode}, <{len(self._out)} on stdout>, {self.stderr!r})"


class Transport(Protocol):
    """Runs one command where Slurm's clients live and returns what it printed."""

    def run(self, argv: Sequence[str], stdin: str | None = None, timeout: float = 30.0) -> CommandResult: ...

    def describe(self) -> str: ...


def _text(raw: bytes) -> str:
    """Decode what a command printed, replacing bytes that are not UTF-8 with U+FFFD.

    Why lenient: job names and comments are whatever users typed, and Slurm prints them as given; one name that
    is not UTF-8 must not make a listing unreadable (the parsers name the jobs whose text was replaced).
    """
    return raw.decode("utf-8", errors="replace")


_CHUNK = 1 << 20
# squeue runs with SLURM_BITSTR_LEN=0: libslurm otherwise cuts a job array's task string at 64 bytes ("...") and a
# sparse pending array would lose its indices (core/arrays.py). Only squeue: sbatch would copy the variable into
# the user's job environment. SLURM_TIME_FORMAT=%s: the narrow read (`squeue_narrow.py`) gets times as epoch
# seconds, not the local time of the host squeue runs on (`--json` writes numbers whatever it says).
_SQUEUE_ENV = {"SLURM_BITSTR_LEN": "0", "SLURM_TIME_FORMAT": "%s"}


def _client_env(argv: Sequence[str]) -> dict[str, str]:
    """The variables a Slurm client is run with, besides the environment it inherits."""
    return _SQUEUE_ENV if argv and argv[0] == "squeue" else {}


def _read_all(proc: subprocess.Popen[bytes], timeout: float,
              sink: Callable[[bytes], None] | None = None) -> tuple[bytes, bytes]:
    """Everything the process writes to stdout and stderr, each written into one growing buffer; with `sink`,
    stdout goes to it chunk by chunk instead (and b"" is returned for it).

    Why not `communicate`: it keeps a list of chunks and joins them, so a 100 MB answer briefly takes 200 MB.
    """
    assert proc.stdout is not None and proc.stderr is not None
    out: io.BytesIO | _Sink = io.BytesIO() if sink is None else _Sink(sink)
    _widen(proc.stdout.fileno())
    buffers = {proc.stdout.fileno(): out, proc.stderr.fileno(): io.BytesIO()}
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        for fd in buffers:
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(proc.args, timeout)
            for key, _ in sel.select(left):
                chunk = os.read(key.fd, _CHUNK)
                if chunk:
                    buffers[key.fd].write(chunk)
                else:
                    sel.unregister(key.fd)
    first, err = buffers.values()
    return first.getvalue(), err.getvalue()  # BytesIO hands over its buffer: no copy


def _widen(fd: int) -> None:
    """Let the pipe hold up to `_CHUNK` (Linux: F_SETPIPE_SZ, within /proc/sys/fs/pipe-max-size; the default is
    64 KiB): a 1 GB answer is then read in about a thousand reads and wake-ups instead of sixteen thousand, on both
    sides of the pipe. Elsewhere, or when refused, the pipe stays as it is."""
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)
    if set_size is not None:
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, set_size, _CHUNK)


class _Sink:
    """Stdout handed on as it arrives (`LocalTransport.stream`)."""

    def __init__(self, sink: Callable[[bytes], None]) -> None:
        self.write = sink

    def getvalue(self) -> bytes:
        return b""


def _run_local(argv: Sequence[str], shown: Sequence[str], stdin: str | None, timeout: float,
               extra_env: dict[str, str] | None = None, sink: Callable[[bytes], None] | None = None) -> CommandResult:
    env = {**os.environ, **extra_env} if extra_env else None
    if stdin is not None:  # small commands (a batch script, scontrol lines): the stdlib feeds stdin safely
        try:
            done = subprocess.run(list(argv), input=stdin.encode("utf-8"), capture_output=True, timeout=timeout,
                                  check=False, env=env)
        except FileNotFoundError as exc:
            raise TransportError(shown, None, f"command not found: {exc.filename}; is the Slurm client installed "
                                 "and on PATH?") from None
        except subprocess.TimeoutExpired:
            raise SlurmTimeout(shown, None, f"no answer within {timeout:.0f} s") from None
        return CommandResult(tuple(shown), done.returncode, done.stdout, _text(done.stderr))
    try:
        proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=env)
    except FileNotFoundError as exc:
        raise TransportError(shown, None, f"command not found: {exc.filename}; is the Slurm client installed "
                             "and on PATH?") from None
    with proc:
        try:
            out, err = _read_all(proc, timeout, sink)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise SlurmTimeout(shown, None, f"no answer within {timeout:.0f} s") from None
        code = proc.wait()
    return CommandResult(tuple(shown), code, out, _text(err))


@dataclass(frozen=True, slots=True)
class LocalTransport:
    """Slurm clients on this machine (the login node or the controller)."""

    def run(self, argv: Sequence[str], stdin: str | None = None, timeout: float = 30.0) -> CommandResult:
        return _run_local(argv, argv, stdin, timeout, _client_env(argv))

    def stream(self, argv: Sequence[str], sink: Callable[[bytes], None], timeout: float = 30.0) -> CommandResult:
        """`run`, with stdout handed to `sink` as it arrives instead of kept (the result's stdout is empty): a
        large answer is read without being held whole (`slurm/stream_jobs.py`)."""
        return _run_local(argv, argv, None, timeout, _client_env(argv), sink)

    def describe(self) -> str:
        return "local"


@dataclass(frozen=True, slots=True)
class DockerExecTransport:
    """Slurm clients inside a container: how the host reaches a Slurm of another version than its own."""

    container: str
    user: str | None = None
    docker: str = "docker"

    def run(self, argv: Sequence[str], stdin: str | None = None, timeout: float = 30.0) -> CommandResult:
        prefix = [self.docker, "exec", "-i"]
        if self.user:
            prefix += ["-u", self.user]
        prefix += [f"--env={name}={value}" for name, value in _client_env(argv).items()]
        result = _run_local([*prefix, self.container, *argv], argv, stdin, timeout)
        if result.empty and result.stderr.startswith(("Error response from daemon", "OCI runtime exec")):
            raise TransportError(argv, result.returncode, f"docker exec into {self.container}: "
                                 f"{result.stderr.strip().removeprefix('Error response from daemon: ')}")
        return result

    def describe(self) -> str:
        return f"docker exec {self.container}" + (f" as {self.user}" if self.user else "")


class SshTransport:
    """Slurm clients on a remote login node, over SSH (paramiko).

    The host key must already be in known_hosts: an unknown host is an error, never auto-accepted, because
    the daemon would otherwise hand job control to whoever answers on that address.
    """

    def __init__(self, host: str, port: int = 22, user: str | None = None, known_hosts: str | None = None,
                 key_file: str | None = None, connect_timeout: float = 10.0) -> None:
        self.host, self.port, self.user = host, port, user
        self.known_hosts = os.path.expanduser(known_hosts) if known_hosts else None
        self.key_file = os.path.expanduser(key_file) if key_file else None
        self.connect_timeout = connect_timeout
        self._client: object | None = None

    def describe(self) -> str:
        return f"ssh {self.user + '@' if self.user else ''}{self.host}:{self.port}"

    def _connect(self, shown: Sequence[str]) -> object:
        import paramiko

        if self._client is not None:
            transport = self._client.get_transport()  # type: ignore[attr-defined]
            if transport is not None and transport.is_active():
                return self._client
        client = paramiko.SSHClient()
        if self.known_hosts:
            if not Path(self.known_hosts).exists():
                raise TransportError(shown, None, f"known_hosts file {self.known_hosts} does not exist")
            client.load_host_keys(self.known_hosts)
        else:
            client.load_system_host_keys()
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        try:
            client.connect(self.host, port=self.port, username=self.user, key_filename=self.key_file,
                           timeout=self.connect_timeout, allow_agent=self.key_file is None,
                           look_for_keys=self.key_file is None)
        except paramiko.SSHException as exc:
            text = str(exc)
            if "not found in known_hosts" in text:
                text = (f"host key of {self.host}:{self.port} is not in {self.known_hosts or 'known_hosts'}; "
                        "add it with ssh-keyscan after checking its fingerprint")
            raise TransportError(shown, None, f"ssh to {self.host}:{self.port}: {text}") from None
        except OSError as exc:
            raise TransportError(shown, None, f"ssh to {self.host}:{self.port}: {exc}") from None
        self._client = client
        return client

    def run(self, argv: Sequence[str], stdin: str | None = None, timeout: float = 30.0) -> CommandResult:
        """One command on its own channel, every step bounded by `timeout`.

        The channel is driven directly, never through paramiko's file objects: a stdin file left to the garbage
        collector closes itself from whichever thread collects it, and when that is paramiko's transport thread
        (holding the channel's lock) the close deadlocks it and our caller with it (seen in CI, `close()` hung).
        """
        import paramiko

        client = self._connect(argv)
        extra = _client_env(argv)  # `env NAME=value cmd`: any login shell runs it, csh too
        command = shlex.join(["env", *(f"{k}={v}" for k, v in extra.items()), *argv] if extra else argv)
        deadline = time.monotonic() + timeout
        late = SlurmTimeout(argv, None, f"no answer within {timeout:.0f} s over {self.describe()}")
        try:
            chan = client.get_transport().open_session(timeout=timeout)  # type: ignore[attr-defined]
        except (paramiko.SSHException, OSError, EOFError) as exc:
            self.close()  # a broken connection is opened afresh by the next command
            raise TransportError(argv, None, f"ssh to {self.host}:{self.port}: {exc or 'no session'}") from None
        try:
            chan.settimeout(timeout)
            chan.exec_command(command)
            if stdin is not None:
                chan.sendall(stdin.encode("utf-8"))
            chan.shutdown_write()  # the remote command reads EOF at once: nothing waits on an open stdin
            out, err = _drain(chan, deadline)
            if out is None or err is None:
                raise late
            code = chan.recv_exit_status() if chan.exit_status_ready() else -1
        except TimeoutError:
            raise late from None
        except paramiko.SSHException as exc:
            raise TransportError(argv, None, f"ssh to {self.host}:{self.port}: {exc}") from None
        finally:
            chan.close()
        return CommandResult(tuple(argv), code, out, _text(err))

    def close(self) -> None:
        if self._client is not None:
            self._client.close()  # type: ignore[attr-defined]
            self._client = None


def _drain(chan: object, deadline: float) -> tuple[bytes | None, bytes | None]:
    """A channel's stdout and stderr until the server's EOF, and its exit status; (None, None) past the deadline.

    Both streams are read as they come, so a command filling one never blocks on the other. The end is the EOF,
    not the exit status: sshd sends the exit status as soon as the command ends, while output still waiting for
    window space follows it (a remote `squeue --json` of a few MB was cut short when we stopped at the status).
    After the EOF the channel's descriptor stays readable for good, so the status is waited for on its own event.
    """
    out, err = bytearray(), bytearray()
    with selectors.DefaultSelector() as selector:
        selector.register(chan, selectors.EVENT_READ)  # type: ignore[arg-type]
        while True:
            while chan.recv_ready():  # type: ignore[attr-defined]
                out += chan.recv(65536)  # type: ignore[attr-defined]
            while chan.recv_stderr_ready():  # type: ignore[attr-defined]
                err += chan.recv_stderr(65536)  # type: ignore[attr-defined]
            read_all = chan.eof_received or chan.closed  # type: ignore[attr-defined]
            buffered = chan.recv_ready() or chan.recv_stderr_ready()  # type: ignore[attr-defined]
            if read_all and not buffered and (chan.exit_status_ready() or chan.closed):  # type: ignore[attr-defined]
                return bytes(out), bytes(err)
            left = deadline - time.monotonic()
            if left <= 0:
                return None, None
            if read_all:
                chan.status_event.wait(min(left, 1.0))  # type: ignore[attr-defined]
            else:
                selector.select(min(left, 1.0))


class ReplayTransport:
    """A scripted transport that replays output recorded from real Slurm versions (tests only).

    Answers are matched on the command's leading words; every call is kept in `calls` for assertions.
    """

    def __init__(self, answers: dict[tuple[str, ...], CommandResult | list[CommandResult]]) -> None:
        self._answers = {k: (v if isinstance(v, list) else [v]) for k, v in answers.items()}
        self.calls: list[tuple[tuple[str, ...], str | None]] = []

    def describe(self) -> str:
        return "replay"

    def run(self, argv: Sequence[str], stdin: str | None = None, timeout: float = 30.0) -> CommandResult:
        self.calls.append((tuple(argv), stdin))
        for size in range(len(argv), 0, -1):
            queue = self._answers.get(tuple(argv[:size]))
            if queue:
                result = queue.pop(0) if len(queue) > 1 else queue[0]
                return CommandResult(tuple(argv), result.returncode, result.stdout, result.stderr)
        raise TransportError(argv, None, "no recorded answer for this command")
