"""Remotes of a store: add, list, fetch, push and clone, by running the git binary.

The network side of sharing; every command goes through :func:`gitmem.store.git.run_git`.
Authentication is whatever git already uses (ssh agent,
credential helper); gitmem never sees or stores a secret. Commands never wait for a
password prompt (``GIT_TERMINAL_PROMPT=0``): a remote that needs one fails with a message.
"""

from __future__ import annotations

import logging
import re
import shlex
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from gitmem.errors import ConflictError, RemoteBusy, RepositoryError
from gitmem.store.discover import is_store_commit
from gitmem.store.git import NETWORK_TIMEOUT, GitResult, redact, run_git
from gitmem.store.purgelog import PURGES_REF, fetched_purges_ref, purges_refspec
from gitmem.store.repository import Repository

log = logging.getLogger(__name__)

_REMOTE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@dataclass(frozen=True)
class Remote:
    """A configured remote: its name and fetch URL."""

    name: str
    url: str


def _local_path(url: str, root: Path) -> Path | None:
    """The folder a remote URL names on this machine (``file://`` or a path), else None."""
    if url.startswith("file://"):
        return Path(unquote(urlsplit(url).path))
    first = url.split("/", 1)[0]
    if "://" in url or (":" in first and not re.fullmatch(r"[A-Za-z]:", first)):
        return None  # a network URL, or scp-like host:path (ssh)
    path = Path(url)
    return path if path.is_absolute() else root / path


def _has_password(url: str) -> bool:
    try:
        return "://" in url and bool(urlsplit(url).password)
    except ValueError:
        return False


def sync_hint(remote: str) -> str:
    """The command that syncs with ``remote``, quoted for the shell (plain ``gitmem sync``
    would sync origin)."""
    return "`" + shlex.join(["gitmem", "sync", *([remote] if remote != "origin" else [])]) + "`"


class Remotes:
    """The remotes of one store, and the network operations on them."""

    def __init__(self, repo: Repository) -> None:
        self.repo = repo

    def _git(self, *args: str, timeout: float | None = None) -> GitResult:
        # the caller reads the exit status: most failures get a message of their own
        return run_git(self.repo.root, *args, timeout=timeout, ok=None)

    def list(self) -> list[Remote]:
        """Every configured remote with its URL, by name."""
        done = self._git("config", "--local", "-z", "--get-regexp", r"^remote\..*\.url$")
        found = []
        for item in done.stdout.split("\0"):
            key, _, url = item.partition("\n")
            if key:
                found.append(Remote(key[len("remote.") : -len(".url")], url))
        return sorted(found, key=lambda r: r.name)

    def url(self, name: str) -> str:
        """The URL of remote ``name`` (password hidden, for messages); RepositoryError naming
        the known remotes if there is no such remote."""
        for remote in self.list():
            if remote.name == name:
                return redact(remote.url)
        known = ", ".join(r.name for r in self.list()) or "none"
        raise RepositoryError(
            f"{self.repo.root}: no remote named {name!r} (known: {known}); "
            f"add one with `gitmem remote add {shlex.quote(name)} URL`"
        )

    def add(self, name: str, url: str) -> Remote:
        """Configure a new remote (the URL is stored as given; put no password in it)."""
        if not _REMOTE_NAME.fullmatch(name) or ".." in name or name.endswith((".lock", ".")):
            raise RepositoryError(
                f"invalid remote name {name!r}: use letters, digits, '.', '_' and '-'"
            )
        if not url or url.startswith("-") or any(ch in url for ch in "\n\r\0"):
            raise RepositoryError(f"invalid remote URL {url!r}")
        if _has_password(url):
            raise RepositoryError(
                f"remote URL {redact(url)} carries a password; gitmem never stores secrets: "
                "leave it out and let git's credential helper or ssh agent authenticate"
            )
        if any(r.name == name for r in self.list()):
            raise RepositoryError(
                f"{self.repo.root}: remote {name!r} exists already ({self.url(name)})"
            )
        run_git(self.repo.root, "remote", "add", "--", name, url)
        self.track_records(name)
        return Remote(name, url)

    def track_records(self, remote: str) -> None:
        """Make a plain ``git fetch`` / ``git pull`` of ``remote`` bring its record of purges
        too, so that the hooks know what a purge there removed."""
        key = f"remote.{remote}.fetch"
        have = self._git("config", "--local", "--get-all", key).stdout.split()
        if purges_refspec(remote) not in have:
            self._git("config", "--local", "--add", key, purges_refspec(remote))

    def tracking_ref(self, remote: str, branch: str) -> str:
        """The ref holding what was last fetched from ``remote``'s ``branch``."""
        return f"refs/remotes/{remote}/{branch}"

    def fetch(self, remote: str, branch: str) -> str | None:
        """Fetch every branch of ``remote``; returns the commit its ``branch`` is at.

        Returns None when the remote has no branches at all (a new, empty repository).

        Raises:
            RepositoryError: the remote cannot be reached, or it has branches but not
                ``branch``, or it is not a gitmem store.
        """
        url = self.url(remote)
        self.track_records(remote)
        done = self._git(
            "fetch",
            "--no-tags",
            "--prune",
            "--quiet",
            remote,
            f"+refs/heads/*:refs/remotes/{remote}/*",
            purges_refspec(remote),  # the record of purges, so a purge made there applies here
            timeout=NETWORK_TIMEOUT,
        )
        if done.returncode != 0:
            raise RepositoryError(
                f"cannot fetch from remote {remote!r} ({url}): {done.tail()}; "
                "check the URL, the network and your git credentials. Local memory is unchanged."
            )
        tip = self.resolve(self.tracking_ref(remote, branch))
        if tip is None:
            others = self._git("for-each-ref", "--format=%(refname)", f"refs/remotes/{remote}/")
            names = [n.rsplit("/", 1)[-1] for n in others.stdout.split() if n]
            if names:
                raise RepositoryError(
                    f"remote {remote!r} ({url}) has no branch {branch!r} (it has "
                    f"{', '.join(sorted(names))}); it does not look like this store's remote"
                )
            return None
        self.check_is_store(tip, f"remote {remote!r} ({url})")
        return tip

    def check_is_store(self, commit: str, what: str) -> None:
        """Raise RepositoryError unless ``commit`` holds a gitmem store (the merge attributes)."""
        if not is_store_commit(self.repo, commit):
            raise RepositoryError(
                f"{what} is not a gitmem store: its branch ({commit[:12]}) has no .gitattributes "
                "with merge=gitmem. Local memory is unchanged."
            )

    def resolve(self, rev: str) -> str | None:
        """The commit id ``rev`` names, or None."""
        done = self._git("rev-parse", "--verify", "--quiet", "--end-of-options", rev + "^{commit}")
        return done.stdout.strip() or None if done.returncode == 0 else None

    def is_ancestor(self, older: str, newer: str) -> bool:
        """Whether ``older`` is reachable from ``newer``."""
        done = run_git(self.repo.root, "merge-base", "--is-ancestor", older, newer, ok=(0, 1))
        return done.returncode == 0

    def merge_base(self, a: str, b: str) -> str | None:
        """The best common ancestor of two commits, or None if their histories are unrelated."""
        done = self._git("merge-base", a, b)
        return done.stdout.strip() or None if done.returncode == 0 else None

    def tips(self, remote: str) -> dict[str, str]:
        """Ref -> commit of the remote's branches and record of purges (``git ls-remote``:
        nothing is fetched)."""
        url = self.url(remote)
        self.track_records(remote)
        done = self._git("ls-remote", remote, "refs/heads/*", PURGES_REF, timeout=NETWORK_TIMEOUT)
        if done.returncode != 0:
            raise RepositoryError(
                f"cannot push to remote {remote!r} ({url}): {done.tail()}; check the URL, the "
                "network and your git credentials"
            )
        pairs = (line.split("\t", 1) for line in done.stdout.splitlines() if "\t" in line)
        return {ref: sha for sha, ref in pairs}

    def fetch_records(self, remote: str) -> str | None:
        """Fetch only the remote's record of purges; returns where it is kept here (None
        when the remote has none)."""
        url = self.url(remote)
        done = self._git(
            "fetch", "--no-tags", "--quiet", remote, purges_refspec(remote), timeout=NETWORK_TIMEOUT
        )
        if done.returncode != 0:
            raise RepositoryError(f"cannot fetch from remote {remote!r} ({url}): {done.tail()}")
        return self.resolve(fetched_purges_ref(remote)) and fetched_purges_ref(remote)

    def push(self, remote: str, branch: str, *, lease: str | None = None) -> bool:
        """Push the local ``branch`` to the same branch of ``remote``, with the record of
        purges when there is one (both or neither: ``--atomic``).

        ``lease``: the commit the remote's branch must still be at for it to be replaced by
        a history that does not contain it (a purge rewrote it); never a blind force push.

        Returns:
            False if the remote had nothing new to take (already up to date), else True.

        Raises:
            ConflictError: the remote has commits (or purges) this store does not, or it
                moved away from ``lease``.
            RepositoryError: the remote cannot be reached or refused the push.
        """
        url = self.url(remote)
        refspec = f"refs/heads/{branch}:refs/heads/{branch}"
        specs = [refspec]
        if self.resolve(PURGES_REF):
            specs.append(f"{PURGES_REF}:{PURGES_REF}")
        options = ["--atomic"] if len(specs) > 1 else []
        if lease:
            options.append(f"--force-with-lease=refs/heads/{branch}:{lease}")
        done = self._git("push", "--porcelain", *options, remote, *specs, timeout=NETWORK_TIMEOUT)
        statuses: dict[str, tuple[str, str]] = {}
        for line in done.stdout.splitlines():
            parts = line.split("\t")
            if len(parts) >= 3 and parts[1] in specs:
                statuses[parts[1]] = (parts[0], parts[2])
        status = statuses.get(refspec, ("", ""))[0]
        details = " ".join(d for _, d in statuses.values())
        # a push in flight on the remote holds its ref lock ("Unable to create ...lock: File
        # exists"): nothing moved, try again; a push that landed while ours was in flight
        # ("cannot lock ref ... but expected") means the remote has new commits
        if status == "!" and "cannot lock ref" in done.stderr and "Unable to create" in done.stderr:
            raise RemoteBusy(
                f"push to {remote!r} ({url}) not applied: another push was updating the remote's "
                f"{branch} at that moment (its ref lock was taken); nothing was lost, try again"
            )
        raced = "cannot lock ref" in done.stderr or "failed to update ref" in details
        moved = any(word in details for word in ("fetch first", "non-fast-forward", "stale info"))
        if status == "!" and (moved or raced):
            raise ConflictError(
                f"push to {remote!r} ({url}) rejected: the remote has commits this store does not "
                f"have ({details}). Run {sync_hint(remote)} (fetch, merge, push) instead."
            )
        if done.returncode != 0 or status == "" or any(s == "!" for s, _ in statuses.values()):
            problem = done.tail()
            raise RepositoryError(
                f"cannot push to remote {remote!r} ({url}): {problem}; check the URL, the "
                "network and your git credentials"
            )
        self._point_head(remote, branch, created=status == "*")
        return any(s != "=" for s, _ in statuses.values())

    def _point_head(self, remote: str, branch: str, *, created: bool) -> None:
        """Make a plain ``git clone`` of the remote land on ``branch`` when the remote's HEAD
        names a branch it does not have (a bare repository made with another default).

        A bare repository on this machine is fixed (``git symbolic-ref``); git cannot set a
        network remote's HEAD, so after a first push there the problem is logged instead.
        """
        url = self._raw_url(remote)
        local = _local_path(url, self.repo.root)
        if local is not None:

            def there(*args: str) -> GitResult:
                return run_git(None, "--git-dir", str(local), *args, ok=None)

            if there("rev-parse", "--is-bare-repository").stdout.strip() != "true":
                return  # a non-bare remote's HEAD is its own checkout: not ours to move
            target = there("symbolic-ref", "-q", "HEAD").stdout.strip()
            if target and there("rev-parse", "--verify", "--quiet", target).returncode != 0:
                there("symbolic-ref", "HEAD", f"refs/heads/{branch}")
            return
        if not created:
            return
        listed = self._git("ls-remote", "--symref", remote, "HEAD", timeout=NETWORK_TIMEOUT)
        if listed.returncode == 0 and not any(
            line.endswith("\tHEAD") and not line.startswith("ref:")
            for line in listed.stdout.splitlines()
        ):
            log.warning(
                "the remote %r (%s) has no default branch (its HEAD names a missing branch): "
                "a plain `git clone` checks out nothing. Set it on the server (`git "
                "symbolic-ref HEAD refs/heads/%s` in the bare repository), or clone with "
                "`gitmem clone` or `git clone --branch %s`",
                remote,
                redact(url),
                branch,
                branch,
            )

    def _raw_url(self, name: str) -> str:
        for found in self.list():
            if found.name == name:
                return found.url
        return ""

    def merge_text(self, base: bytes, ours: bytes, theirs: bytes) -> tuple[bytes, int]:
        """git's line-based three-way merge of three contents: (result, conflict count)."""
        folder = self.repo.state_dir / "tmp"
        with tempfile.TemporaryDirectory(dir=folder) as tmp:
            names = []
            for label, data in (("ours", ours), ("base", base), ("theirs", theirs)):
                path = Path(tmp) / label
                path.write_bytes(data)
                names.append(str(path))
            # the exit status is the number of conflicts (git caps it at 127)
            done = run_git(
                self.repo.root,
                "merge-file",
                "-p",
                "-L",
                "ours",
                "-L",
                "base",
                "-L",
                "theirs",
                *names,
                ok=range(128),
            )
        return done.out, done.returncode


def clone(url: str, path: Path) -> None:
    """``git clone url path``; RepositoryError (with git's reason) if it fails.

    Hooks are never copied by a clone; the new store runs only hooks its user installs.
    """
    if path.exists() and any(path.iterdir()):
        raise RepositoryError(f"{path} exists and is not empty; clone into a new folder")
    if not url or url.startswith("-"):
        raise RepositoryError(f"invalid remote URL {url!r}")
    if _has_password(url):
        raise RepositoryError(
            f"URL {redact(url)} carries a password; gitmem never stores secrets (git would "
            "keep it in .git/config): leave it out and let git's credential helper authenticate"
        )
    done = run_git(
        None,
        "clone",
        "--quiet",
        "--no-tags",
        "--",
        url,
        str(path),
        timeout=NETWORK_TIMEOUT,
        ok=None,
    )
    if done.returncode != 0:
        raise RepositoryError(
            f"cannot clone {redact(url)}: {done.tail()}; check the URL, the network "
            "and your git credentials"
        )
    run_git(path, "config", "--local", "--add", "remote.origin.fetch", purges_refspec("origin"))
    if run_git(path, "rev-parse", "--verify", "--quiet", "HEAD", ok=None).returncode == 0:
        return
    unborn = run_git(path, "symbolic-ref", "--short", "HEAD", ok=None).stdout.strip()
    # the remote's HEAD names a branch it does not have (a bare repository made with
    # another default branch): check out main, or its only branch
    listed = run_git(path, "for-each-ref", "--format=%(refname:lstrip=3)", "refs/remotes/origin/")
    branches = [b for b in listed.stdout.split() if b != "HEAD"]
    pick = "main" if "main" in branches else branches[0] if len(branches) == 1 else None
    if pick is None:
        if branches:
            raise RepositoryError(
                f"cannot clone {redact(url)}: its HEAD names no branch and it has several "
                f"({', '.join(branches)}); clone it with git clone --branch"
            )
        return  # an empty repository
    done = run_git(path, "checkout", "--quiet", "-b", pick, "--track", f"origin/{pick}", ok=None)
    if done.returncode != 0:
        raise RepositoryError(f"cannot check out {pick} of {redact(url)}: {done.tail()}")
    if unborn and unborn != pick:  # exit 128 when git kept no such section
        run_git(path, "config", "--local", "--remove-section", f"branch.{unborn}", ok=None)
