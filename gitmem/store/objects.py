"""Git's on-disk byte formats: loose objects, trees, commits and packs (the index file's
format is in ``gitindex``).

Pure functions and small value classes, no file I/O: the repository layers do the reading
and writing. Writing objects in-process instead of spawning ``git add``/``git commit`` is what
makes one save cost a few milliseconds.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from bisect import bisect_left
from dataclasses import dataclass, field

MODE_FILE = b"100644"

MODE_EXEC = b"100755"

MODE_LINK = b"120000"

MODE_TREE = b"40000"

MODE_GITLINK = b"160000"

# Big objects (the sessions tree of a large store) are stored without compression on the
# save path: zlib costs ~4 ms per 450 kB, and the periodic repack delta-compresses them anyway.
_STORE_UNCOMPRESSED_ABOVE = 64 * 1024


def object_id(kind: str, data: bytes) -> str:
    """The hex object id git gives ``data`` as an object of type ``kind``."""
    digest = hashlib.sha1(f"{kind} {len(data)}\0".encode())
    digest.update(data)  # no concatenation: trees of big stores are ~0.5 MB
    return digest.hexdigest()


def loose_object(kind: str, data: bytes) -> tuple[str, bytes]:
    """The object id and the zlib stream git stores in ``objects/xx/yyyy``."""
    raw = f"{kind} {len(data)}\0".encode() + data
    level = 0 if len(raw) > _STORE_UNCOMPRESSED_ABOVE else 1
    return hashlib.sha1(raw).hexdigest(), zlib.compress(raw, level)


def _sort_key(name: bytes, mode: bytes) -> bytes:
    # git orders tree entries as if directory names ended with "/"
    return name + b"/" if mode == MODE_TREE else name


class JoinedChunks:
    """``b"".join(chunks)`` kept between edits, patched in place when one chunk is replaced
    by one of the same length (the common edit: a file's object id changes).

    A save changes one entry of a 10,000-entry tree and index; re-joining ~1 MB each time
    costs more than the rest of the save's bookkeeping.
    """

    def __init__(self) -> None:
        self.buffer: bytearray | None = None
        self.offsets: list[int] = []

    def copy(self) -> JoinedChunks:
        twin = JoinedChunks()
        if self.buffer is not None:
            twin.buffer, twin.offsets = bytearray(self.buffer), self.offsets
        return twin

    def replaced(self, at: int, old: bytes, new: bytes) -> None:
        if self.buffer is None:
            return
        if len(old) != len(new):
            self.buffer = None
            return
        start = self.offsets[at]
        self.buffer[start : start + len(new)] = new

    def invalidate(self) -> None:
        self.buffer = None

    def join(self, chunks: list[bytes]) -> bytearray:
        if self.buffer is None:
            self.buffer = bytearray(b"".join(chunks))
            offsets, pos = [], 0
            for chunk in chunks:
                offsets.append(pos)
                pos += len(chunk)
            self.offsets = offsets
        return self.buffer


@dataclass
class Tree:
    """A parsed tree object that can be edited and re-serialised cheaply.

    Entries are kept sorted in git order together with their serialised form, so that
    changing one entry of a 10,000-entry tree is a bisect and a join, not a re-sort.
    """

    keys: list[bytes]
    chunks: list[bytes]
    entries: dict[bytes, tuple[bytes, bytes]]
    shared_keys: bool = False
    joined: JoinedChunks = field(default_factory=JoinedChunks)

    @classmethod
    def empty(cls) -> Tree:
        return cls([], [], {})

    @classmethod
    def parse(cls, data: bytes) -> Tree:
        """Parse the body of a tree object."""
        keys: list[bytes] = []
        chunks: list[bytes] = []
        entries: dict[bytes, tuple[bytes, bytes]] = {}
        pos = 0
        size = len(data)
        while pos < size:
            space = data.index(b" ", pos)
            nul = data.index(b"\0", space)
            mode = data[pos:space]
            name = data[space + 1 : nul]
            sha = data[nul + 1 : nul + 21]
            chunks.append(data[pos : nul + 21])
            keys.append(_sort_key(name, mode))
            entries[name] = (mode, sha)
            pos = nul + 21
        return cls(keys, chunks, entries)

    def serialize(self) -> bytes:
        return bytes(self.joined.join(self.chunks))

    def copy(self) -> Tree:
        # ``keys`` only changes when an entry is added or removed: share it until then
        return Tree(
            self.keys,
            list(self.chunks),
            dict(self.entries),
            shared_keys=True,
            joined=self.joined.copy(),
        )

    def set(self, name: bytes, mode: bytes, sha: bytes) -> None:
        """Add or replace entry ``name`` (``sha`` is the 20-byte binary id)."""
        old = self.entries.get(name)
        key = _sort_key(name, mode)
        if old is not None and old[0] == mode:
            at = bisect_left(self.keys, key)
            chunk = mode + b" " + name + b"\0" + sha
            self.joined.replaced(at, self.chunks[at], chunk)
            self.chunks[at] = chunk
            self.entries[name] = (mode, sha)
            return
        if old is not None:
            self.remove(name)
        self.joined.invalidate()
        if self.shared_keys:
            self.keys, self.shared_keys = list(self.keys), False
        at = bisect_left(self.keys, key)
        self.keys.insert(at, key)
        self.chunks.insert(at, mode + b" " + name + b"\0" + sha)
        self.entries[name] = (mode, sha)

    def remove(self, name: bytes) -> None:
        self.joined.invalidate()
        if self.shared_keys:
            self.keys, self.shared_keys = list(self.keys), False
        mode, _ = self.entries.pop(name)
        at = bisect_left(self.keys, _sort_key(name, mode))
        del self.keys[at]
        del self.chunks[at]


_MODES = (MODE_FILE, MODE_EXEC, MODE_LINK, MODE_TREE, MODE_GITLINK)


def find_tree_entry(data: bytes, name: bytes) -> tuple[bytes, bytes] | None:
    """(mode, binary sha) of entry ``name`` in a serialised tree, without parsing it all.

    A match must start at an entry boundary: a known mode at the start of the tree or right
    after the 20-byte id that follows the previous entry's NUL. Bytes of an object id that
    happened to spell out ``<NUL>...<mode> <name><NUL>`` would fool this; at this length
    that is less likely than a SHA-1 collision.
    """
    needle = b" " + name + b"\0"
    at = data.find(needle)
    while at >= 0:
        for mode in _MODES:
            start = at - len(mode)
            if (
                start >= 0
                and data[start:at] == mode
                and (start == 0 or (start >= 21 and data[start - 21] == 0))
            ):
                sha_at = at + len(needle)
                return mode, data[sha_at : sha_at + 20]
        at = data.find(needle, at + 1)
    return None


@dataclass(frozen=True)
class Signature:
    """A commit author or committer: name, email, seconds since the epoch, UTC offset."""

    name: str
    email: str
    when: int
    offset_minutes: int

    def encode(self) -> bytes:
        sign = "-" if self.offset_minutes < 0 else "+"
        hours, minutes = divmod(abs(self.offset_minutes), 60)
        name = _clean_ident(self.name) or "gitmem"
        email = _clean_ident(self.email) or "gitmem@localhost"
        return f"{name} <{email}> {self.when} {sign}{hours:02d}{minutes:02d}".encode()


def _clean_ident(text: str) -> str:
    # git fsck rejects '<', '>' and newlines inside an identity
    return " ".join(text.replace("<", "").replace(">", "").split())


def commit_body(
    tree: str, parents: list[str], author: Signature, committer: Signature, message: str
) -> bytes:
    """Serialise a commit object body."""
    lines = [f"tree {tree}".encode()]
    lines += [f"parent {p}".encode() for p in parents]
    lines.append(b"author " + author.encode())
    lines.append(b"committer " + committer.encode())
    text = message if message.endswith("\n") else message + "\n"
    return b"\n".join(lines) + b"\n\n" + text.encode()


def format_message(subject: str, body: str = "", trailers: dict[str, str] | None = None) -> str:
    """A commit message: one-line subject, optional body, then ``Key: value`` trailers."""
    parts = [" ".join(subject.split()) or "gitmem change"]
    if body.strip():
        parts.append(body.strip())
    if trailers:
        parts.append(
            "\n".join(f"{k}: {' '.join(str(v).split())}" for k, v in trailers.items() if str(v))
        )
    return "\n\n".join(parts) + "\n"


_PACK_TYPES = {"commit": 1, "tree": 2, "blob": 3, "tag": 4}


def _pack_header(kind: str, size: int) -> bytes:
    out = bytearray()
    byte = (_PACK_TYPES[kind] << 4) | (size & 0x0F)
    size >>= 4
    while size:
        out.append(byte | 0x80)
        byte = size & 0x7F
        size >>= 7
    out.append(byte)
    return bytes(out)


def encode_pack(objects: list[tuple[str, bytes, str]]) -> tuple[str, bytes, bytes]:
    """A version-2 pack and its version-2 index holding ``objects`` (no deltas).

    ``objects`` are (kind, data, hex id); returns (pack name, pack bytes, index bytes).
    Creating files is what costs most on a save, so a save writes these two files instead
    of one per object.
    """
    entries: dict[bytes, tuple[int, int]] = {}
    parts = [b"PACK", struct.pack(">II", 2, 0)]
    offset = 12
    for kind, data, hexsha in objects:
        raw_id = bytes.fromhex(hexsha)
        if raw_id in entries:
            continue
        level = 0 if len(data) > _STORE_UNCOMPRESSED_ABOVE else 1
        record = _pack_header(kind, len(data)) + zlib.compress(data, level)
        entries[raw_id] = (offset, zlib.crc32(record))
        parts.append(record)
        offset += len(record)
    parts[1] = struct.pack(">II", 2, len(entries))
    body = b"".join(parts)
    pack_sum = hashlib.sha1(body).digest()
    pack = body + pack_sum

    ids = sorted(entries)
    fanout = [0] * 256
    for raw_id in ids:
        fanout[raw_id[0]] += 1
    running = 0
    for at in range(256):
        running += fanout[at]
        fanout[at] = running
    index = b"".join(
        [
            b"\377tOc",
            struct.pack(">I", 2),
            struct.pack(">256I", *fanout),
            *ids,
            *(struct.pack(">I", entries[i][1]) for i in ids),
            *(struct.pack(">I", entries[i][0]) for i in ids),
            pack_sum,
        ]
    )
    index += hashlib.sha1(index).digest()
    return pack_sum.hex(), pack, index
