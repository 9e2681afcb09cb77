"""Session ids <-> file paths inside the store, reversibly and safely.

Percent-encoding keeps every id readable when it is plain (``session_2024`` stays as is),
makes ``a/b`` and ``a_b`` different files, and leaves no way out of ``sessions/``.

Portability: only letters, digits, ``-_.`` stay as they are, so no name holds a character
Windows forbids, and NFC and NFD spellings of an id get different names. What remains is
checked when a session is created (:func:`portability_problem`, :func:`fold_name`): names
that are Windows devices (``CON``, ``nul.x``, ``COM1``...) are refused, and so is a name equal
to an existing one up to case or Unicode normalisation (one file on macOS and Windows).
Existing names never change, so stores written before keep their files.

Layout: a session's file sits one folder down, ``sessions/<xx>/<enc>.md`` with ``xx`` the first
two hex digits of the SHA-1 of the case- and normalisation-folded file name
(:func:`fanout_folder`), so that one save rewrites a 256-entry tree and a small sub-tree
instead of one tree naming every session. Folding first puts names that one file system would
confuse into the same folder, where the twin check sees them. The file name is the encoded id,
and :func:`id_from_path` checks that the folder is the one the id belongs in. The layout is
said by a small committed file, ``.gitmem-layout`` (:func:`layout_text`).
"""

from __future__ import annotations

import functools
import hashlib
import unicodedata

from gitmem.errors import InvalidSessionId

SESSIONS_DIR = "sessions"

SUFFIX = ".md"

# file names longer than this fail on common filesystems (255 bytes) once a suffix is added
MAX_NAME_BYTES = 240

_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


def _plain(ch: str) -> bool:
    # non-ASCII letters and digits (e.g. CJK ids) stay readable in file names
    return ch in _PLAIN or (ord(ch) > 127 and ch.isalnum())


def encode_id(session_id: str) -> str:
    """The file name stem for ``session_id``; raises InvalidSessionId when it has none."""
    if not isinstance(session_id, str) or not session_id:
        raise InvalidSessionId("session id may not be empty")
    # most ids are plain ASCII: one C scan instead of a look at every character
    if session_id[0] != "." and _PLAIN.issuperset(session_id) and len(session_id) <= MAX_NAME_BYTES:
        return session_id
    if session_id != session_id.strip():
        raise InvalidSessionId(f"session id {session_id!r} has leading or trailing spaces")
    out: list[str] = []
    for at, ch in enumerate(session_id):
        if _plain(ch) and not (at == 0 and ch == "."):
            out.append(ch)
        else:
            try:
                raw = ch.encode("utf-8")
            except UnicodeEncodeError:
                raise InvalidSessionId(
                    f"session id {session_id!r} contains a lone surrogate"
                ) from None
            out.extend(f"%{b:02X}" for b in raw)
    name = "".join(out)
    if len(name.encode("utf-8")) > MAX_NAME_BYTES:
        raise InvalidSessionId(
            f"session id {session_id[:40]!r}... is too long "
            f"({len(name.encode())} bytes encoded, at most {MAX_NAME_BYTES})"
        )
    return name


# device names Windows reserves, with or without an extension (``nul.txt`` too)
_DEVICES = frozenset(
    {"CON", "PRN", "AUX", "NUL"}
    | {f"{dev}{n}" for dev in ("COM", "LPT") for n in [*"0123456789", "\u00b9", "\u00b2", "\u00b3"]}
)


def portability_problem(session_id: str) -> str | None:
    """Why a new session's file name would break a clone on Windows, or None if it is fine."""
    stem = encode_id(session_id).split(".", 1)[0]
    if stem.upper() in _DEVICES:
        return (
            f"session id {session_id!r} would be stored as {stem}{SUFFIX}, a reserved device "
            "name on Windows (CON, PRN, AUX, NUL, COM0-9, LPT0-9, with any extension); "
            "pick another id"
        )
    return None


def fold_name(name: str) -> str:
    """How a case- and normalisation-insensitive file system (macOS, Windows) sees a file
    name: two names with the same fold are one file there."""
    if name.isascii():
        return name.lower()  # what casefold and both normalisations make of ASCII
    return unicodedata.normalize("NFC", unicodedata.normalize("NFD", name).casefold())


def decode_id(name: str) -> str:
    """Inverse of :func:`encode_id`; raises InvalidSessionId for a name it never produces."""
    if "%" not in name and encode_id(name) == name:
        return name  # no escape: the name is the id
    raw = bytearray()
    at = 0
    while at < len(name):
        ch = name[at]
        if ch == "%":
            try:
                raw.append(int(name[at + 1 : at + 3], 16))
            except ValueError:
                raise InvalidSessionId(f"bad escape in session file name {name!r}") from None
            at += 3
        else:
            raw.extend(ch.encode("utf-8"))
            at += 1
    try:
        session_id = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidSessionId(f"session file name {name!r} is not UTF-8") from None
    if encode_id(session_id) != name:
        raise InvalidSessionId(f"{name!r} is not a canonical session file name")
    return session_id


def fanout_folder(session_id: str) -> str:
    """The fan-out sub-folder of a session: two hex digits (256 folders)."""
    return hashlib.sha1(fold_name(encode_id(session_id)).encode("utf-8")).hexdigest()[:2]


def _is_folder(name: str) -> bool:
    return len(name) == 2 and all(ch in "0123456789abcdef" for ch in name)


def session_path(session_id: str, namespace: str | None = None) -> str:
    """The store-relative path (always with ``/``) of a session's file."""
    base = (
        SESSIONS_DIR if namespace is None else f"namespaces/{encode_id(namespace)}/{SESSIONS_DIR}"
    )
    return f"{base}/{fanout_folder(session_id)}/{encode_id(session_id)}{SUFFIX}"


@functools.lru_cache(maxsize=256)
def session_dir(namespace: str | None = None) -> str:
    """The folder holding a namespace's session files (in its sub-folders)."""
    return session_path("x", namespace).rsplit("/", 2)[0]


# a listing asks this of every session file of the store, again on each call
@functools.lru_cache(maxsize=1 << 16)
def id_from_path(path: str, namespace: str | None = None) -> str | None:
    """The session id a store path belongs to, or None if it is not a session file: a file
    in the fan-out sub-folder of the namespace's folder that its id belongs in."""
    folder = session_dir(namespace) + "/"
    if not path.startswith(folder) or not path.endswith(SUFFIX):
        return None
    name = path[len(folder) : -len(SUFFIX)]
    sub, _, rest = name.rpartition("/")
    if not _is_folder(sub):
        return None
    try:
        session_id = decode_id(rest)
    except InvalidSessionId:
        return None
    if fanout_folder(session_id) != sub:
        return None  # a file put in the wrong folder by hand: check() reports it
    return session_id


# a huge session continues in numbered parts beside its file (``<enc>~0001.md``...), the
# older turns; "~" is never in an encoded id, so no session file is taken for a part
PART_MARK = "~"


def part_path(session_id: str, number: int, namespace: str | None = None) -> str:
    """The store path of part ``number`` (from 1) of a session: its older turns, in order."""
    stem = session_path(session_id, namespace)[: -len(SUFFIX)]
    return f"{stem}{PART_MARK}{number:04d}{SUFFIX}"


def part_of(path: str, namespace: str | None = None) -> tuple[str, int] | None:
    """(session id, part number) of a session's part file, or None if ``path`` is not one."""
    stem, mark, rest = path.rpartition(PART_MARK)
    number = rest[: -len(SUFFIX)]
    if not mark or not rest.endswith(SUFFIX) or not (number.isascii() and number.isdigit()):
        return None
    session_id = id_from_path(stem + SUFFIX, namespace)
    return None if session_id is None else (session_id, int(number))


def id_from_part_path(path: str, namespace: str | None = None) -> str | None:
    """The session id a part file belongs to, or None if ``path`` is not one."""
    found = part_of(path, namespace)
    return None if found is None else found[0]


def is_fanout_path(path: str) -> bool:
    """Whether a session file or archive part sits in a fan-out sub-folder."""
    parts = path.split("/")
    return len(parts) >= 3 and _is_folder(parts[-2])


def misplaced(path: str) -> str | None:
    """Where a file in a ``sessions`` or ``archive`` folder should be instead, when it is a
    session's file in a sub-folder its id does not belong in (e.g. moved by hand)."""
    head, sub, name = path.rsplit("/", 2) if path.count("/") >= 2 else ("", "", path)
    if not _is_folder(sub) or not name.endswith(SUFFIX):
        return None
    try:
        session_id = decode_id(name[: -len(SUFFIX)])
    except InvalidSessionId:
        return None
    right = fanout_folder(session_id)
    return None if right == sub else f"{head}/{right}/{name}"


LAYOUT_FILE = ".gitmem-layout"

FANOUT = "fanout"


def layout_text() -> bytes:
    """The content of ``.gitmem-layout`` for a layout."""
    return (
        "# How gitmem lays out session files here (written by gitmem; see docs/format.md).\n"
        "# fanout: sessions/<xx>/<id>.md, xx = first 2 hex digits of sha1(folded file name)\n"
        f"{FANOUT}\n"
    ).encode()


ARCHIVE_DIR = "archive"


def archive_path(session_id: str, namespace: str | None = None) -> str:
    """The store path of a session's archive part: summarized raw turns moved out of the
    main file (``archive/<xx>/<enc>.md``, beside ``sessions/`` so it is never taken as a
    session)."""
    return f"{archive_dir(namespace)}/{fanout_folder(session_id)}/{encode_id(session_id)}{SUFFIX}"


def archive_dir(namespace: str | None = None) -> str:
    """The folder holding a namespace's archive parts."""
    base = session_dir(namespace)
    return base[: -len(SESSIONS_DIR)] + ARCHIVE_DIR


def id_from_archive_path(path: str, namespace: str | None = None) -> str | None:
    """The session id an archive part belongs to, or None if ``path`` is not one."""
    folder = archive_dir(namespace) + "/"
    if not path.startswith(folder) or not path.endswith(SUFFIX):
        return None
    return id_from_path(session_dir(namespace) + "/" + path[len(folder) :], namespace)


# the curated memory file (facts), beside the sessions: one per namespace
MEMORY_DIR = "memory"

MEMORY_FILE = f"{MEMORY_DIR}/MEMORY.md"


def memory_path(namespace: str | None = None) -> str:
    """The memory file's path in the store (``namespaces/<ns>/memory/MEMORY.md`` for one)."""
    if namespace is None:
        return MEMORY_FILE
    return f"namespaces/{encode_id(namespace)}/{MEMORY_FILE}"


def is_facts_path(path: str) -> bool:
    """Whether ``path`` is a curated memory file: ``memory/*.md`` or
    ``namespaces/<ns>/memory/*.md`` (what ``.gitattributes`` gives ``merge=gitmem``)."""
    parts = path.split("/")
    if not parts[-1].endswith(SUFFIX) or len(parts[-1]) == len(SUFFIX):
        return False
    if len(parts) == 2:
        return parts[0] == MEMORY_DIR
    return len(parts) == 4 and parts[0] == "namespaces" and parts[2] == MEMORY_DIR


def own_facts_path(path: str, namespace: str | None) -> bool:
    """Whether ``path`` is a memory file of ``namespace`` (None: the default one)."""
    return is_facts_path(path) and path.startswith(memory_path(namespace).rsplit("/", 1)[0] + "/")


NAMESPACES_DIR = "namespaces"


def in_namespace_layout(path: str) -> bool:
    """Whether a file under ``namespaces/`` is where a namespace keeps something: a session
    file, an archive part or a memory file of a namespace whose folder name decodes."""
    parts = path.split("/")
    if len(parts) < 3 or parts[0] != NAMESPACES_DIR:
        return False
    try:
        namespace = decode_id(parts[1])
    except InvalidSessionId:
        return False
    return (
        own_facts_path(path, namespace)
        or id_from_path(path, namespace) is not None
        or id_from_archive_path(path, namespace) is not None
    )
