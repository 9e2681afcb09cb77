"""The one way gitmem runs the git binary: safe ``-c`` options, environment, timeouts, errors.

Every git process gitmem starts goes through :func:`run_git` (the ``cat-file`` pipes that
GitPython keeps open for object reads, in ``objects.py``, and the one ``cat-file --batch`` a
search index rebuild streams blobs from, :meth:`GitCommands.stream_blobs`, get the same
safe options), so
one place answers: which of the store's own settings may run code (none: a store that
arrives as a copied folder may carry hooks or an fsmonitor command in ``.git``), what the
environment is (never a password prompt, messages in English), how long a command may take,
and what a failure says (the command, its exit status and the end of git's message, with no
password from a URL). :class:`GitCommands` is the runner ``Repository`` and its parts share.

Kept light (no GitPython): the merge driver imports it, and git starts the driver once per
merged file.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import subprocess
import threading
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from gitmem.errors import RepositoryError

# gitmem's own git commands run no hooks and no fsmonitor: a store that arrives as a folder
# (a copy, an archive, a shared volume) may carry .git/hooks or config that would execute
SAFE_GIT_CONFIG = ("core.hooksPath=/dev/null", "core.fsmonitor=false")

SAFE_GIT_ARGS = tuple(arg for item in SAFE_GIT_CONFIG for arg in ("-c", item))

# git's own timeout for a stalled transfer is long; this bounds one network command
NETWORK_TIMEOUT = 600.0

# scheme://user:password@ anywhere in a text (git quotes URLs in its messages)
_PASSWORD_IN_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^\s/@:'\"]*:)[^\s/@'\"]*@")


def redact(url: str) -> str:
    """``url`` with any password replaced by ``***`` (for messages)."""
    if "://" not in url:
        return url
    from urllib.parse import urlsplit, urlunsplit  # here: the merge driver starts without it

    with contextlib.suppress(ValueError):
        parts = urlsplit(url)
        if parts.password:
            host = parts.netloc.rsplit("@", 1)[-1]
            return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))
    return url


def redact_text(text: str) -> str:
    """``text`` with the password of every URL in it replaced by ``***``."""
    return _PASSWORD_IN_URL.sub(r"\1***@", text)


def last_lines(text: str, count: int = 4) -> str:
    """The last ``count`` non-blank lines of ``text`` on one line, passwords in URLs hidden."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return redact_text(" / ".join(lines[-count:]))


def describe(args: Collection[str]) -> str:
    """``git <args>`` for a message: quoted, passwords hidden, long arguments shortened."""
    shown = [redact_text(arg) if len(arg) <= 80 else redact_text(arg[:77]) + "..." for arg in args]
    text = shlex.join(["git", *shown])
    return text if len(text) <= 240 else text[:237] + "..."


def environment() -> dict[str, str]:
    """The environment of every git command: the caller's, never waiting on a prompt."""
    env = dict(os.environ)
    env["GIT_TERMINAL_PROMPT"] = "0"  # fail instead of hanging on a password prompt
    env["LC_ALL"] = "C"  # messages in English, so that they can be classified
    return env


@dataclass(frozen=True)
class GitResult:
    """A finished git command: its exit status and raw output."""

    args: tuple[str, ...]
    cwd: Path | None
    returncode: int
    out: bytes
    err: bytes

    @property
    def stdout(self) -> str:
        """Standard output as text (bytes that are not UTF-8 kept as surrogates)."""
        return self.out.decode("utf-8", "surrogateescape")

    @property
    def stderr(self) -> str:
        """git's messages as text."""
        return self.err.decode("utf-8", "replace")

    def tail(self, count: int = 4) -> str:
        """The last lines of git's message (of stdout if stderr is empty), for an error."""
        return last_lines(self.stderr, count) or last_lines(self.stdout, count)

    def error(self) -> RepositoryError:
        """The error for this command's failure: command, folder, exit status, git's words."""
        where = f" in {self.cwd}" if self.cwd is not None else ""
        return RepositoryError(
            f"{describe(self.args)} failed{where} (exit {self.returncode}): "
            f"{self.tail() or 'git printed no message'}"
        )


def run_git(
    cwd: str | os.PathLike[str] | None,
    *args: str,
    ok: Collection[int] | None = (0,),
    timeout: float | None = None,
    safe: bool = True,
    stdin: bytes | None = None,
) -> GitResult:
    """Run ``git args`` in ``cwd`` (None: the current folder) and return the result.

    Args:
        ok: the exit statuses that are not a failure; any other raises. None: never raise
            on the exit status (the caller reads ``returncode``).
        timeout: seconds before the command is stopped (network commands: NETWORK_TIMEOUT).
        safe: run no hook or fsmonitor of the repository; only a question about the store's
            own settings (where its hooks live) turns it off.
        stdin: bytes to feed the command; without it, git reads nothing (no stray wait on
            the caller's terminal).

    Raises:
        RepositoryError: the exit status is not in ``ok``, the command ran out of time, or
            git could not be started; the message names the command, the folder, the exit
            status and the last lines git printed (passwords in URLs hidden).
    """
    folder = None if cwd is None else Path(cwd)
    where = f" in {folder}" if folder is not None else ""
    try:
        done = subprocess.run(
            ["git", *(SAFE_GIT_ARGS if safe else ()), *args],
            cwd=folder,
            input=stdin,
            stdin=subprocess.DEVNULL if stdin is None else None,
            capture_output=True,
            env=environment(),
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise RepositoryError(
            f"{describe(args)}{where} did not finish within {timeout:g}s and was stopped; "
            "is the remote reachable?"
        ) from None
    except OSError as exc:  # no git binary, or the folder is gone
        raise RepositoryError(f"cannot run {describe(args)}{where}: {exc.strerror}") from None
    result = GitResult(tuple(args), folder, done.returncode, done.stdout, done.stderr)
    if ok is not None and result.returncode not in ok:
        raise result.error()
    return result


class GitCommands:
    """Runs git in one store (through :func:`run_git`)."""

    def __init__(self, root: Path, git_dir: Path) -> None:
        self.root = root  # the working tree's top folder
        self.git_dir = git_dir

    def git(self, *args: str) -> str:
        """Run a read-only git command in the store and return its output (text, without the
        final newline); RepositoryError if it fails."""
        return run_git(self.root, *args).stdout.removesuffix("\n")

    def run_git(self, *args: str, ok: tuple[int, ...] = (0,)) -> tuple[int, bytes]:
        """Run a read-only git command in the store (paths printed unquoted); (exit code,
        stdout). RepositoryError unless the exit code is in ``ok``."""
        done = run_git(self.root, "-c", "core.quotepath=false", *args, ok=ok)
        return done.returncode, done.out

    def config_section(self, section: str) -> list[tuple[str, str]]:
        """(key, value) pairs of git config keys ``<section>.*`` (e.g. ``gitmem.summary``),
        keys as git prints them; empty when none is set."""
        pattern = "^" + section.replace(".", r"\.") + r"\."
        done = run_git(self.root, "config", "--get-regexp", pattern, ok=None)
        if done.returncode != 0:
            return []  # 1: no key matches; an unreadable config leaves the defaults
        split = (line.partition(" ") for line in done.stdout.splitlines())
        return [(key, value) for key, _, value in split]

    def configured_identity(self) -> tuple[str, str]:
        """``user.name`` and ``user.email`` from git config (empty strings if unset)."""
        values = dict(self.config_section("user"))
        return values.get("user.name", ""), values.get("user.email", "")

    def ensure_config(self, values: dict[str, str]) -> None:
        """Set ``section.key`` entries of the store's own git config where they differ."""
        # called on every open: a plain read of the file settles the usual case (all set)
        with contextlib.suppress(OSError):
            raw = (self.git_dir / "config").read_text(errors="replace")
            if all(
                f"\t{name.rpartition('.')[2]} = {value}\n" in raw for name, value in values.items()
            ):
                return
        # git itself reads and writes: it knows config quoting (paths with spaces, quotes)
        listed = run_git(self.root, "config", "--local", "-z", "--get-regexp", ".", ok=None)
        current: dict[str, str] = {}
        for item in listed.stdout.split("\0"):
            key, _, setting = item.partition("\n")
            current[key] = setting
        for name, value in values.items():
            if current.get(name.lower()) != value:
                done = run_git(self.root, "config", "--local", name, value, ok=None)
                if done.returncode != 0:
                    raise RepositoryError(
                        f"cannot set {name} in {self.git_dir / 'config'}: {done.tail()}"
                    )

    def stream_blobs(self, shas: Iterable[str]) -> Iterator[tuple[str, bytes | None]]:
        """(blob id, content or None when missing) of each of ``shas``, in order, through
        one ``git cat-file --batch`` process (a rebuild reads every file of a commit: one
        process instead of a request per file). RepositoryError if git fails."""
        for sha, kind, data in self.stream_objects(shas):
            yield sha, (data if kind == "blob" else None)

    def stream_objects(self, shas: Iterable[str]) -> Iterator[tuple[str, str, bytes | None]]:
        """(id, type, body) of each of ``shas`` of any type, in order, as
        :meth:`stream_blobs` reads them; a missing one is (id, "missing", None)."""
        wanted = list(shas)
        if not wanted:
            return
        try:
            proc = subprocess.Popen(
                ["git", *SAFE_GIT_ARGS, "cat-file", "--batch"],
                cwd=self.root,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=environment(),
            )
        except OSError as exc:
            raise RepositoryError(f"cannot run git cat-file in {self.root}: {exc}") from None
        stdin, stdout = proc.stdin, proc.stdout
        assert stdin is not None and stdout is not None

        def feed() -> None:  # a thread: git answers while we still ask (no pipe deadlock)
            with contextlib.suppress(OSError):
                stdin.write("".join(f"{sha}\n" for sha in wanted).encode())
                stdin.close()

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        try:
            for sha in wanted:
                header = stdout.readline().split()
                if len(header) == 2 and header[1] == b"missing":
                    yield sha, "missing", None
                    continue
                if len(header) != 3 or header[0].decode() != sha:
                    raise RepositoryError(
                        f"git cat-file --batch in {self.root} answered {header!r} for {sha}"
                    )
                data = stdout.read(int(header[2]))
                stdout.read(1)  # the newline after each object
                yield sha, header[1].decode(), data
        finally:
            stdout.close()
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            feeder.join()
