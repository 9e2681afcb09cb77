"""The byte formats, checked against the real git binary."""

from __future__ import annotations

import subprocess
import zlib
from pathlib import Path

from gitmem.store.gitindex import GitIndex
from gitmem.store.objects import Tree, deflated, encode_pack, loose_object, object_id
from tests.conftest import git


def test_pack_written_by_us_is_read_and_verified_by_git(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    blob = b"hello\n" * 1000
    big = bytes(range(256)) * 400  # above the uncompressed threshold
    objects = [
        ("blob", blob, object_id("blob", blob)),
        ("blob", big, object_id("blob", big)),
        ("blob", blob, object_id("blob", blob)),
    ]  # duplicates are written once
    name, pack, index = encode_pack(objects)
    folder = tmp_path / ".git" / "objects" / "pack"
    (folder / f"pack-{name}.pack").write_bytes(pack)
    (folder / f"pack-{name}.idx").write_bytes(index)
    out = git(tmp_path, "verify-pack", "-v", str(folder / f"pack-{name}.idx"))
    assert "ok" in out.splitlines()[-1]
    assert git(tmp_path, "cat-file", "-p", objects[0][2]) == blob.decode()
    assert git(tmp_path, "cat-file", "-s", objects[1][2]).strip() == str(len(big))


def test_big_objects_are_framed_in_stored_blocks_git_reads(tmp_path: Path) -> None:
    for size in (0, 1, 64 * 1024 + 1, 0xFFFF * 2, 0xFFFF * 2 + 1, 300_000):
        data = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
        assert zlib.decompress(deflated(data)) == data, size
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    big = b"a line of a large memory file\n" * 20_000
    hexsha, stream = loose_object("blob", big)
    folder = tmp_path / ".git" / "objects" / hexsha[:2]
    folder.mkdir()
    (folder / hexsha[2:]).write_bytes(stream)
    assert git(tmp_path, "cat-file", "-s", hexsha).strip() == str(len(big))
    git(tmp_path, "fsck", "--full", "--no-dangling")


def test_tree_edits_match_git_mktree(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    sha = bytes.fromhex(object_id("blob", b"x"))
    tree = Tree.empty()
    for name in [b"b.md", b"a", b"a.md", b"a-b", b"z"]:
        tree.set(name, b"100644", sha)
    tree.set(b"a", b"40000", bytes.fromhex(object_id("tree", b"")))  # dir sorts as "a/"
    copy = tree.copy()
    copy.remove(b"z")
    copy.set(b"b.md", b"100644", bytes.fromhex(object_id("blob", b"y")))
    assert b"z" in tree.entries  # the original is untouched by edits to the copy
    listing = "".join(
        f"{'040000 tree' if mode == b'40000' else '100644 blob'} {raw.hex()}\t{name.decode()}\n"
        for name, (mode, raw) in copy.entries.items()
    )
    done = subprocess.run(
        ["git", "mktree", "--missing"],
        input=listing,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == object_id("tree", copy.serialize())


def test_index_round_trip_and_edit() -> None:
    index = GitIndex.empty()
    stat = (1, 2, 3, 4, 5, 6, 0o100644, 0, 0, 9)
    index.set(b"sessions/b.md", stat, b"\1" * 20)
    index.set(b"sessions/a.md", stat, b"\2" * 20)
    index.set(b"sessions/a.md", stat, b"\3" * 20)
    again = GitIndex.parse(index.encode())
    assert again.keys == index.keys
    assert again.entry_sha(b"sessions/a.md") == b"\3" * 20
    again.remove(b"sessions/a.md")
    assert again.entry_sha(b"sessions/a.md") is None
    assert again.entry_sha(b"sessions/b.md") == b"\1" * 20


def test_patched_buffers_equal_a_fresh_join() -> None:
    import random

    rng = random.Random(3)
    tree, index = Tree.empty(), GitIndex.empty()
    names = [f"s{n:03d}.md".encode() for n in range(60)]
    for step in range(400):
        name = rng.choice(names)
        sha = bytes(rng.randrange(256) for _ in range(20))
        if step % 7 == 0 and name in tree.entries:
            tree.remove(name)
            index.remove(b"sessions/" + name)
        else:
            tree.set(name, b"100644", sha)
            index.set(b"sessions/" + name, (step,) * 6 + (0o100644, 0, 0, step), sha)
        if step % 5 == 0:
            tree = tree.copy()  # copies share offsets; edits must not leak between them
        assert tree.serialize() == b"".join(tree.chunks)
        encoded = index.encode()
        assert GitIndex.parse(encoded).chunks == index.chunks
