"""``gitmem scan``: secrets that reached a store's history, found without printing them.

A secret can reach history around gitmem's guards (a person's ``git commit``, a pull, a
store made before redaction, a custom pattern added later). This module reads everything a
push would publish: the lines each commit of every branch and tag added (binary files too:
a file with NUL bytes is read as text), file and ref names, commit and annotated tag
messages, and author, committer and tagger names and emails. Each finding names where it
is and whether HEAD still shows it, with the secret masked.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from gitmem.guard.secrets import SecretConfig, find_secrets
from gitmem.models import _Model

if TYPE_CHECKING:
    from gitmem.store.repository import Repository


MESSAGE_PATH = "(commit message)"

# the other places that are not a file's lines; a file name's finding has line 0
AUTHOR_PATH = "(author or committer)"

TAG_PATH = "(tag message)"

TAGGER_PATH = "(tagger)"

REF_PATH = "(ref name)"

_PLACES = {
    MESSAGE_PATH: "commit message",
    AUTHOR_PATH: "author or committer",
    TAG_PATH: "tag message",
    TAGGER_PATH: "tagger",
    REF_PATH: "ref name",
}


class SecretFinding(_Model):
    """A secret found in history: where it was added, what kind, and a masked form.

    ``path`` is a file's path, or one of ``(commit message)``, ``(author or committer)``,
    ``(tag message)``, ``(tagger)``, ``(ref name)``; a secret in a file's *name* has line 0
    and the name with the secret masked as its path. ``at_head`` says whether HEAD still
    shows it: the current version of the file, HEAD's own message or author, a tag or ref
    that still exists.
    """

    commit: str
    path: str
    line: int
    kind: str
    masked: str
    at_head: bool | None

    # positional too, as the dataclass this model replaced (one per finding: cheap enough)
    def __init__(
        self, commit: str, path: str, line: int, kind: str, masked: str, at_head: bool | None
    ) -> None:
        super().__init__(
            **dict(commit=commit, path=path, line=line, kind=kind, masked=masked, at_head=at_head)
        )

    def __str__(self) -> str:
        if self.path in _PLACES:
            where = _PLACES[self.path]
        elif self.line == 0:
            where = f"file name {self.path}"
        else:
            where = f"{self.path}:{self.line}"
        head = " (still at HEAD)" if self.at_head else ""
        return f"{self.commit[:12]} {where}: {self.kind} {self.masked}{head}"


def scan_repository(repo: Repository, config: SecretConfig) -> list[SecretFinding]:
    """Every secret in ``repo``'s history (see the module docs), oldest commit first."""
    head = repo.head()
    findings: list[SecretFinding] = []
    head_text: dict[str, str] = {}
    for commit, path, first_line, block in _added_blocks(repo):
        for found in find_secrets(block, config):
            secret = block[found.start : found.end]
            if path not in head_text:
                data = repo.read(path)
                head_text[path] = "" if data is None else data.decode("utf-8", "replace")
            findings.append(
                SecretFinding(
                    commit,
                    path,
                    first_line + found.line - 1,
                    found.kind,
                    found.masked,
                    secret in head_text[path],
                )
            )
    findings += _names(repo, config)
    _, out = repo.run_git(
        "log", "--all", "--reverse", "-z", "--format=%H%x01%an <%ae>%x01%cn <%ce>%x01%B"
    )
    for entry in out.decode("utf-8", "replace").split("\0"):
        commit, _, rest = entry.partition("\x01")
        author, _, rest = rest.partition("\x01")
        committer, _, message = rest.partition("\x01")
        commit = commit.strip()
        if not commit:
            continue
        for found in find_secrets(message, config):
            findings.append(
                SecretFinding(
                    commit, MESSAGE_PATH, found.line, found.kind, found.masked, commit == head
                )
            )
        for who in dict.fromkeys([author, committer]):
            for found in find_secrets(who, config):
                findings.append(
                    SecretFinding(commit, AUTHOR_PATH, 1, found.kind, found.masked, commit == head)
                )
    findings += _refs(repo, config)
    return list(dict.fromkeys(findings))


def _names(repo: Repository, config: SecretConfig) -> list[SecretFinding]:
    """Secrets in the names of files, in the commit that first used each name."""
    _, out = repo.run_git(
        "log",
        "--all",
        "--reverse",
        "--format=%x00%H",
        "--name-only",
        "--no-renames",
        "--diff-merges=first-parent",
    )
    found_in: list[SecretFinding] = []
    seen: set[str] = set()
    commit = ""
    for raw in out.decode("utf-8", "replace").split("\n"):
        if raw.startswith("\0"):
            commit = raw[1:].strip()
            continue
        name = _unquote(raw)
        if not name or name in seen:
            continue
        seen.add(name)
        hits = list(find_secrets(name, config))
        if not hits:
            continue
        shown = name
        for hit in reversed(hits):
            shown = shown[: hit.start] + hit.masked + shown[hit.end :]
        at_head = repo.entry(name) is not None
        found_in += [SecretFinding(commit, shown, 0, hit.kind, hit.masked, at_head) for hit in hits]
    return found_in


def _refs(repo: Repository, config: SecretConfig) -> list[SecretFinding]:
    """Secrets in ref names and in annotated tags (message, tagger)."""
    _, out = repo.run_git("for-each-ref", "--format=%(objectname) %(objecttype) %(refname)")
    found_in: list[SecretFinding] = []
    for line in out.decode("utf-8", "replace").splitlines():
        sha, _, rest = line.partition(" ")
        kind, _, ref = rest.partition(" ")
        for hit in find_secrets(ref, config):
            found_in.append(SecretFinding(sha, REF_PATH, 1, hit.kind, hit.masked, True))
        if kind != "tag":
            continue
        _, raw = repo.run_git("cat-file", "tag", sha)
        header, _, message = raw.decode("utf-8", "replace").partition("\n\n")
        tagger = next(
            (h[len("tagger ") :] for h in header.splitlines() if h.startswith("tagger ")), ""
        )
        for hit in find_secrets(message, config):
            found_in.append(SecretFinding(sha, TAG_PATH, hit.line, hit.kind, hit.masked, True))
        for hit in find_secrets(tagger.rsplit(">", 1)[0], config):
            found_in.append(SecretFinding(sha, TAGGER_PATH, 1, hit.kind, hit.masked, True))
    return found_in


def _added_blocks(repo: Repository) -> Iterator[tuple[str, str, int, str]]:
    """(commit, path, first line, text) of every run of lines a commit added."""
    _, out = repo.run_git(
        "log",
        "--all",
        "--reverse",
        "-p",
        "--text",
        "--format=%x00%H",
        "--unified=0",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        "--no-renames",
        "--diff-merges=first-parent",
        "--src-prefix=a/",
        "--dst-prefix=b/",
    )
    commit = path = ""
    in_hunk = False
    start = 0
    block: list[str] = []

    def flush() -> Iterator[tuple[str, str, int, str]]:
        if block and path:
            yield commit, path, start, "\n".join(block)
        block.clear()

    for raw in out.split(b"\n"):
        line = raw.decode("utf-8", "replace")
        if line.startswith("\0"):  # our marker: a file's lines all start with + - or \\
            yield from flush()
            commit, path, in_hunk = line[1:].strip(), "", False
        elif line.startswith("diff --git "):
            yield from flush()
            path, in_hunk = "", False
        elif not in_hunk and line.startswith("+++ "):
            path = _diff_path(line[4:])
        elif line.startswith("@@ "):
            yield from flush()
            in_hunk = True
            start = _hunk_start(line)
        elif in_hunk and line.startswith("+"):
            block.append(line[1:])
        elif in_hunk and not line.startswith("\\"):
            yield from flush()
            start += 0 if line.startswith("-") else 1
    yield from flush()


def _unquote(text: str) -> str:
    if text.startswith('"') and text.endswith('"') and len(text) > 1:  # C-quoted name
        text = text[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
        text = text.encode("latin-1", "replace").decode("utf-8", "replace")
    return text


def _diff_path(text: str) -> str:
    if text == "/dev/null":
        return ""
    text = _unquote(text)
    return text[2:] if text.startswith("b/") else text


def _hunk_start(header: str) -> int:
    # @@ -a,b +c,d @@: the added lines start at line c of the new file
    new = header.split(" ")[2]
    return int(new[1:].split(",")[0] or 1)
