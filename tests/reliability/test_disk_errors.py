"""A write that fails (disk full, read-only, no permission, file-size limit) raises a clear
RepositoryError and leaves the previous commit and files as they were."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitmem.errors import RepositoryError
from gitmem.manager import MemoryManager
from tests.conftest import git
from tests.reliability.conftest import ROOT, fsck_problems

BIG = "a paragraph of a long answer, " * 4000  # ~120 KB


def _snapshot(store: Path) -> tuple[str, dict[str, bytes]]:
    files = {
        str(p.relative_to(store)): p.read_bytes()
        for p in store.rglob("*")
        if p.is_file() and ".git" not in p.parts
    }
    return git(store, "rev-parse", "HEAD").strip(), files


def _assert_intact(store: Path, before: tuple[str, dict[str, bytes]]) -> None:
    assert _snapshot(store) == before
    # (no optional locks: on a full disk git status could not refresh the index)
    assert git(store, "--no-optional-locks", "status", "--porcelain") == ""
    assert fsck_problems(store) == []


@contextlib.contextmanager
def _tmpfs(size: str) -> Iterator[Path]:
    """A small tmpfs of its own, or a skip where mounting is not allowed."""
    mount = Path(tempfile.mkdtemp(prefix="gitmem-tmpfs-"))
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        mount.rmdir()
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)
        with contextlib.suppress(OSError):
            mount.rmdir()


def _fill(folder: Path, leave: int) -> Path:
    """Fill the file system of ``folder`` up to ``leave`` bytes of free space."""
    filler = folder / "filler"
    with open(filler, "wb") as handle:
        free = os.statvfs(folder).f_bavail * os.statvfs(folder).f_frsize
        chunk = b"\0" * 65536
        remaining = max(free - leave, 0)
        try:
            while remaining > 0:
                remaining -= handle.write(chunk[: min(len(chunk), remaining)])
                handle.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return filler


@pytest.mark.parametrize("leave", [0, 4096, 16384, 65536, 131072])
def test_a_full_disk_fails_the_save_cleanly(leave: int) -> None:
    with _tmpfs("3m") as mount:
        store = mount / "memory"
        mm = MemoryManager.init(store)
        mm.save_interaction("s", "first", "ok")
        before = _snapshot(store)
        filler = _fill(mount, leave)
        try:
            sha = mm.save_interaction("s", BIG, "ok")
        except RepositoryError as exc:
            message = str(exc)
            assert "disk is full" in message and "Nothing was saved" in message, message
            assert before[0][:12] in message
            _assert_intact(store, before)
        else:  # it fitted: then it is whole
            assert sha == git(store, "rev-parse", "HEAD").strip()
        filler.unlink()
        # with room again, the next save works and everything is consistent
        assert mm.save_interaction("s", "after", "ok")
        assert git(store, "status", "--porcelain") == ""
        assert fsck_problems(store) == []
        session = mm.load_memory("s")
        assert session is not None and session.interactions[-1].messages[0].content == "after"
        mm.close()


def test_a_read_only_store_can_be_read_but_not_written() -> None:
    with _tmpfs("8m") as mount:
        store = mount / "memory"
        with MemoryManager.init(store) as writer:
            writer.save_interaction("s", "first", "ok")
        before = _snapshot(store)
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        mm = MemoryManager(store)
        session = mm.load_memory("s")
        assert session is not None and session.interactions[0].messages[0].content == "first"
        assert [s.id for s in mm.list_sessions()] == ["s"]
        with pytest.raises(RepositoryError, match="read-only") as caught:
            mm.save_interaction("s", "second", "ok")
        assert "Nothing was saved" in str(caught.value)
        mm.close()
        assert _snapshot(store) == before
        subprocess.run(["mount", "-o", "remount,rw", str(mount)], check=True)


def _unprivileged() -> list[str]:
    """A command prefix under which file permissions apply (root ignores them)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: permissions cannot be tested")
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--"]


def _run_limited(
    store: Path, code: str, *, unprivileged: bool = False, fsize: int | None = None
) -> dict[str, str]:
    """Run ``code`` (which sets ``result``) in a subprocess with limits; its result."""
    prelude = (
        "import json, resource, signal, sys\n"
        "from gitmem.manager import MemoryManager\n"
        "from gitmem.errors import GitmemError\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        f"if {fsize!r} is not None:\n"
        f"    resource.setrlimit(resource.RLIMIT_FSIZE, ({fsize!r}, {fsize!r}))\n"
        "result = {}\n"
        "try:\n"
        + "".join(f"    {line}\n" for line in code.splitlines())
        + "except GitmemError as exc:\n"
        "    result = {'error': type(exc).__name__, 'message': str(exc)}\n"
        "print(json.dumps(result))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    prefix = _unprivileged() if unprivileged else []
    done = subprocess.run(
        [*prefix, sys.executable, "-c", prelude, str(store)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, str] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_a_file_size_limit_fails_the_save_cleanly(store: Path) -> None:
    mm = MemoryManager.init(store)
    mm.save_interaction("s", "first", "ok")
    mm.close()
    before = _snapshot(store)
    result = _run_limited(
        store,
        (
            "mm = MemoryManager(sys.argv[1])\n"
            f"result = {{'sha': mm.save_interaction('s', 'x' * {len(BIG)}, 'ok')}}\n"
        ),
        fsize=32768,
    )
    assert result.get("error") == "RepositoryError", result
    assert "file-size limit" in result["message"] and "Nothing was saved" in result["message"]
    _assert_intact(store, before)
    assert MemoryManager(store).save_interaction("s", "second", "ok")
    assert git(store, "status", "--porcelain") == ""


def _writable(store: Path, writable: bool) -> None:
    for path in [store, *store.rglob("*")]:
        if path.is_dir():
            path.chmod(0o755 if writable else 0o555)
        else:
            path.chmod(0o644 if writable else 0o444)


def test_a_store_without_write_permission_fails_clearly(store: Path) -> None:
    MemoryManager.init(store).save_interaction("s", "first", "ok")
    _writable(store, False)
    before = _snapshot(store)
    try:
        result = _run_limited(
            store,
            (
                "mm = MemoryManager(sys.argv[1])\n"
                "assert mm.load_memory('s') is not None\n"
                "result = {'sha': mm.save_interaction('s', 'second', 'ok')}\n"
            ),
            unprivileged=True,
        )
    finally:
        _writable(store, True)
    assert result.get("error") == "RepositoryError", result
    assert "ermission denied" in result["message"] and "Nothing was saved" in result["message"]
    assert str(store) in result["message"]
    _assert_intact(store, before)


def test_objects_folder_without_write_permission_leaves_no_trace(store: Path) -> None:
    MemoryManager.init(store).save_interaction("s", "first", "ok")
    pack = store / ".git" / "objects" / "pack"
    pack.chmod(0o555)
    before = _snapshot(store)
    try:
        result = _run_limited(
            store,
            (
                "mm = MemoryManager(sys.argv[1])\n"
                "result = {'sha': mm.save_interaction('s', 'second', 'ok')}\n"
            ),
            unprivileged=True,
        )
    finally:
        pack.chmod(0o755)
    assert result.get("error") == "RepositoryError", result
    assert "objects/pack" in result["message"] and "Nothing was saved" in result["message"]
    _assert_intact(store, before)
    assert not list((store / ".git" / "gitmem" / "tmp").iterdir())  # no temp file left
