"""Names that go into a commit: the author line of an agent and the file name of a new session.

Both are guards the save path runs before it writes. :func:`agent_identity` turns an agent
name into a commit author that reads as git stores it (no control or format characters, no
angle brackets). :class:`NewNames` refuses a new session whose file would break a clone on
macOS or Windows: a device name, or a twin (up to case or Unicode normalisation) of an
existing file. It keeps the folded names of one sessions folder at one commit and moves them
forward by the names each commit added or removed, so a save does not list the folder again.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from dataclasses import dataclass

from gitmem.errors import InvalidSessionId, ValidationError
from gitmem.format.paths import fold_name, id_from_path, portability_problem
from gitmem.store.objects import MODE_TREE
from gitmem.store.repository import Repository
from gitmem.store.transaction import Identity, Transaction

# an author name is a label, not a place for text: git accepts any length, people's tools do not
AGENT_MAX = 200


def _format_free(text: str) -> str:
    """``text`` without format characters (Unicode Cf: bidi overrides such as U+202E, zero
    widths), which make an author line read differently from what git stores."""
    return "".join(c for c in text if unicodedata.category(c) != "Cf")


def agent_identity(agent: str, email: str | None = None) -> Identity:
    """The commit author for an agent name: ``name <email>`` is split into its parts, angle
    brackets, control and format characters (which would corrupt or disguise the author line)
    are dropped, and an empty name or one longer than ``AGENT_MAX`` is refused. An email with
    such characters is refused. The default email is ``<name-with-dashes>@gitmem.local``."""
    agent = str(agent)
    if len(agent) > AGENT_MAX:
        raise ValidationError(
            f"agent name is {len(agent)} characters long; give at most {AGENT_MAX}"
        )
    given = " ".join(agent.split())
    found = re.fullmatch(r"(.*?)\s*<([^<>]*)>", given)
    if found is not None:
        given, email = found.group(1), email or found.group(2).strip()
    name = " ".join(re.sub(r"[<>\x00-\x1f\x7f]", " ", _format_free(given)).split())
    if not name:
        raise ValidationError(f"agent name {agent!r} is empty; give a name like 'my-bot'")
    if email is not None and (
        not email
        or len(email) > AGENT_MAX
        or re.search(r"[<>\s\x00-\x1f\x7f]", email)
        or _format_free(email) != email
    ):
        shown = repr(email) if len(email) <= AGENT_MAX else f"of {len(email)} characters"
        raise ValidationError(f"agent email {shown} is not an address like bot@example.com")
    slug = re.sub(r"[^\w.+-]+", "-", name).strip("-.") or "agent"
    return Identity(name, email or f"{slug}@gitmem.local")


@dataclass
class _Folds:
    """Folded file names of one sessions folder at one commit."""

    folder: str
    head: str | None
    names: dict[str, set[str]]


class NewNames:
    """Checks the file name of each new session against the folder it goes into."""

    def __init__(self, repo: Repository, namespace: str | None) -> None:
        self._repo = repo
        self._namespace = namespace
        self._lock = threading.Lock()
        self._folds: _Folds | None = None

    def check(
        self, txn: Transaction, created: dict[str, str] | None, session_id: str, path: str
    ) -> None:
        """Refuse ``session_id`` (new at ``path``) if its file would break a clone.

        ``created`` (folded name -> path) holds the names a batch made so far; the new one is
        added to it.
        """
        problem = portability_problem(session_id)
        if problem is not None:
            raise InvalidSessionId(problem)
        folder, name = path.rsplit("/", 1)
        key = fold_name(name)
        twins = self._twins(folder, txn.head(), key)
        if created is not None and key in created:
            twins.add(created[key].rsplit("/", 1)[1])
        twins.discard(name)
        if twins:
            other = id_from_path(f"{folder}/{min(twins)}", self._namespace) or min(twins)
            raise InvalidSessionId(
                f"session id {session_id!r} differs from the existing session {other!r} only "
                "in letter case or Unicode normalisation; on macOS and Windows both would be "
                "one file, so pick another id"
            )
        if created is not None:
            created[key] = path

    def _twins(self, folder: str, head: str | None, key: str) -> set[str]:
        # built once, then moved forward by the names added or removed since (set operations
        # on the two folder trees' names, no Python loop over the folder)
        with self._lock:
            folds = self._folds
            if folds is None or folds.folder != folder or head is None:
                names: dict[str, set[str]] = {}
                for raw in self._folder_entries(folder, head):
                    name = raw.decode("utf-8", "surrogateescape")
                    names.setdefault(fold_name(name), set()).add(name)
                folds = self._folds = _Folds(folder, head, names)
            elif folds.head != head:
                old = self._folder_entries(folder, folds.head).keys()
                new = self._folder_entries(folder, head).keys()
                for raw in old - new:
                    name = raw.decode("utf-8", "surrogateescape")
                    folds.names.get(fold_name(name), set()).discard(name)
                for raw in new - old:
                    name = raw.decode("utf-8", "surrogateescape")
                    folds.names.setdefault(fold_name(name), set()).add(name)
                folds.head = head
            return set(folds.names.get(key, ()))

    def pending(self, txn: Transaction) -> dict[str, bool]:
        """File name -> written (False: deleted) of the folded folder's pending changes."""
        folds = self._folds
        if folds is None:
            return {}
        prefix = folds.folder + "/"
        return {
            path[len(prefix) :]: data is not None
            for path, data in txn.pending.items()
            if path.startswith(prefix) and "/" not in path[len(prefix) :]
        }

    def advance(self, base: str | None, commit: str | None, names: dict[str, bool]) -> None:
        """Our own ``commit`` straight on top of the folded head: apply its ``names``
        (from :meth:`pending`), read nothing."""
        with self._lock:
            folds = self._folds
            if commit is None or folds is None or folds.head is None or folds.head != base:
                return
            if self._repo.parents(commit) != [base]:
                return  # the branch moved meanwhile; the next check diffs the trees
            for name, written in names.items():
                bucket = folds.names.setdefault(fold_name(name), set())
                if written:
                    bucket.add(name)
                else:
                    bucket.discard(name)
            folds.head = commit

    def _folder_entries(self, folder: str, commit: str | None) -> dict[bytes, tuple[bytes, bytes]]:
        if commit is None:
            return {}
        tree = self._repo.tree(self._repo.commit_tree(commit))
        for part in folder.split("/"):
            found = tree.entries.get(part.encode())
            if found is None or found[0] != MODE_TREE:
                return {}
            tree = self._repo.tree(found[1].hex())
        return tree.entries
