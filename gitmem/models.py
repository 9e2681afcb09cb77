"""Pydantic types that cross module boundaries: sessions, interactions, revisions, hits,
and the results the CLI prints as JSON (``to_dict``).

Values are validated here, once, so that every ``Session`` can be rendered to Markdown and
parsed back unchanged (see ``gitmem.format``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime, timezone
from types import MappingProxyType
from typing import Any, Literal, NamedTuple, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from gitmem.errors import ValidationError as GitmemValidationError

# what model constructors raise; other modules catch it through this name so that pydantic
# stays imported by this module only
ModelValidationError = ValidationError

M = TypeVar("M", bound=BaseModel)


def describe_errors(exc: ValidationError) -> str:
    """pydantic's errors as ``field: problem; ...`` without its own wording
    ("1 validation error for ...", "Value error, "), for messages a person reads."""
    problems = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"]) or "value"
        text = str(error["msg"])
        for prefix in ("Value error, ", "Assertion failed, "):
            text = text.removeprefix(prefix)
        problems.append(f"{where}: {text}")
    return "; ".join(problems)


Language = Literal["en", "zh"]

_INTERACTION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}")

# Characters that would change the Markdown structure of a one-line label (speaker,
# tag, metadata key) if they appeared in it.
_LABEL_FORBIDDEN = set("*`\\[]<>|\n\r")

USER_SPEAKERS = frozenset({"user", "用户", "human"})

ASSISTANT_SPEAKERS = frozenset({"assistant", "助手", "ai", "bot"})

SYSTEM_SPEAKERS = frozenset({"system", "系统"})

# Metadata labels the Markdown file uses for ``Session`` fields (English and Chinese, compared
# casefolded); a custom ``extra`` key may not reuse one or it would be read back as that field.
RESERVED_METADATA_KEYS = frozenset(
    key.casefold()
    for key in (
        "Session ID",
        "Created",
        "Last active",
        "Participants",
        "Tags",
        "Project",
        "Links",
        "会话ID",
        "创建时间",
        "最后活跃",
        "参与角色",
        "标签",
        "项目",
        "链接",
    )
)


# Unicode categories Cc (C0, DEL, C1), Cs (surrogates), Zl and Zp, as one scan
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def _has_control(text: str) -> bool:
    return _CONTROL.search(text) is not None


# labels already found valid: the same few speaker names come on every message
_GOOD_LABELS: set[str] = set()
GOOD_LABELS_MAX = 4096


def check_label(value: str, what: str) -> str:
    """Validate a one-line label (speaker name, tag, metadata key or value)."""
    if value in _GOOD_LABELS:
        return value
    if not value or value != value.strip():
        raise ValueError(f"{what} must be non-empty without leading/trailing spaces: {value!r}")
    if _has_control(value) or not _LABEL_FORBIDDEN.isdisjoint(value):
        raise ValueError(
            f"{what} may not contain control characters or any of * ` \\ [ ] < > |: {value!r}"
        )
    if len(_GOOD_LABELS) >= GOOD_LABELS_MAX:
        _GOOD_LABELS.clear()
    _GOOD_LABELS.add(value)
    return value


def check_value(value: str, what: str) -> str:
    """Validate a one-line metadata value (free text, but a single trimmed line)."""
    if value != value.strip():
        raise ValueError(f"{what} may not have leading/trailing spaces: {value!r}")
    if _has_control(value):
        raise ValueError(f"{what} must be a single line without control characters: {value!r}")
    return value


def as_aware(value: datetime) -> datetime:
    """Naive datetimes are taken as UTC so that every stored timestamp is unambiguous.

    Aware ones keep their wall time and UTC offset but get a fixed-offset ``timezone``: that is
    all a file records, and it keeps ``==`` exact (Python never calls a time in the DST fold or
    gap of a zone-aware ``tzinfo`` equal to a time in another zone).
    """
    offset = value.utcoffset()
    if offset is None:
        return value.replace(tzinfo=UTC)
    if type(value.tzinfo) is timezone:
        return value
    return value.replace(tzinfo=timezone(offset), fold=0)


def as_when(value: datetime | str | None, name: str) -> datetime | None:
    """A public datetime parameter (``since``, ``until``, ``timestamp``...) as an aware datetime.

    Every such parameter takes a ``datetime`` (naive means UTC) or an ISO date/date-time string,
    as ``history(since=...)`` always did; anything else is a ``ValidationError`` naming ``name``.
    """
    if value is None or isinstance(value, datetime):
        return None if value is None else as_aware(value)
    if not isinstance(value, str):
        raise GitmemValidationError(
            f"{name}: expected a datetime or an ISO date string, not {type(value).__name__}"
        )
    try:
        return as_aware(datetime.fromisoformat(value.strip()))
    except ValueError:
        shown = repr(value) if len(value) <= 40 else f"a {len(value)}-character string"
        raise GitmemValidationError(
            f"{name}: {shown} is not an ISO date or date-time (e.g. 2024-04-15 or "
            "2024-04-15T15:30:00+02:00)"
        ) from None


def now() -> datetime:
    """The current time, timezone-aware, truncated to whole seconds for readable files."""
    return datetime.now(UTC).astimezone().replace(microsecond=0)


# frozen models' attributes are set this way (as pydantic does itself)
_set_attribute = object.__setattr__


class _Model(BaseModel):
    # frozen: sessions handed out by load_memory are shared with the parse cache.
    # defer_build: a model's validator is built on first use, so a start that needs few of
    # them (the merge driver, once per merged file) does not pay for all of them
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (what ``--json`` prints): datetimes as ISO strings."""
        return self.model_dump(mode="json")


def built(model: type[M], fields: dict[str, Any]) -> M:
    """A ``model`` made from ``fields`` (every field, by name) without validating them: for
    values built valid (an importer's fixed speaker names, hashed ids, aware timestamps).
    What ``model_construct`` makes, at a third of its cost."""
    if len(fields) != len(model.__pydantic_fields__):
        raise TypeError(
            f"{model.__name__}: give every field ({', '.join(model.__pydantic_fields__)})"
        )
    made = model.__new__(model)
    _set_attribute(made, "__dict__", fields)
    _set_attribute(made, "__pydantic_fields_set__", set(fields))
    _set_attribute(made, "__pydantic_extra__", None)
    _set_attribute(made, "__pydantic_private__", None)
    return made


class Result(_Model):
    """A result that is filled in as the work goes (a counter, a status set at the end);
    assignments are not validated, so they cost what a dataclass's do."""

    model_config = ConfigDict(frozen=False)


class Message(_Model):
    """One utterance: who said it and exactly what (kept verbatim, any Unicode)."""

    speaker: str
    content: str

    @field_validator("speaker")
    @classmethod
    def _speaker(cls, value: str) -> str:
        return check_label(value, "speaker")

    @property
    def role(self) -> str:
        """The chat role for the ``openai`` client: user, assistant or system."""
        name = self.speaker.casefold()
        if name in ASSISTANT_SPEAKERS:
            return "assistant"
        if name in SYSTEM_SPEAKERS:
            return "system"
        return "user"


class Interaction(_Model):
    """One turn of a conversation: a stable id, a timestamp and its messages."""

    id: str
    timestamp: datetime
    messages: list[Message] = Field(default_factory=list)

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not _INTERACTION_ID.fullmatch(value):
            raise ValueError(
                f"interaction id {value!r} must be 1-64 characters of letters, digits and . _ : -"
                " starting with a letter or digit"
            )
        return value

    @field_validator("timestamp")
    @classmethod
    def _ts(cls, value: datetime) -> datetime:
        return as_aware(value)

    @property
    def text(self) -> str:
        """All messages joined, ``speaker: content`` per line (for search and snippets)."""
        return "\n".join(f"{m.speaker}: {m.content}" for m in self.messages)


def read_interaction(ident: str, when: datetime, messages: list[Message]) -> Interaction | None:
    """The ``Interaction`` a file's turn makes of these values (messages made valid), checked
    as its validators check them but made without them: a new process would first build
    its validator, which costs more than reading a long session. None where they fail."""
    if not _INTERACTION_ID.fullmatch(ident):
        return None
    return built(Interaction, {"id": ident, "timestamp": as_aware(when), "messages": messages})


class Summary(_Model):
    """A summary of (part of) a session, with who/what produced it and what it covers.

    ``facts`` (key facts, one line each) and ``keywords`` (entities/keywords) are what the
    loss guard compares a newer summary against; both are optional.
    """

    text: str
    generated: datetime
    model: str | None = None
    covers: list[str] = Field(default_factory=list)
    facts: list[str] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)

    @field_validator("generated")
    @classmethod
    def _ts(cls, value: datetime) -> datetime:
        return as_aware(value)

    @field_validator("model")
    @classmethod
    def _model(cls, value: str | None) -> str | None:
        return None if value is None else check_label(value, "summary model")

    @field_validator("covers")
    @classmethod
    def _covers(cls, value: list[str]) -> list[str]:
        for item in value:
            Interaction._id(item)
        return value

    @field_validator("facts", "keywords")
    @classmethod
    def _lines(cls, value: list[str]) -> list[str]:
        for item in value:
            if not item:
                raise ValueError("summary facts and keywords may not be empty")
            check_value(item, "summary fact/keyword")
        return value


_TAG_DROP = set(_LABEL_FORBIDDEN) | {","}

_BULLET = re.compile(r"^[-*•+]\s+")


def _items(value: Any) -> list[str]:
    """Loose input (None, a string, a list of anything) as a list of one-line strings."""
    if value is None:
        return []
    if isinstance(value, str):
        value = value.splitlines()
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"expected a list of strings, got {type(value).__name__}")
    out: list[str] = []
    seen: set[str] = set()
    for item in value:
        text = " ".join(str(item).split()) if item is not None else ""
        # a list marker is dropped only with its space: "**Keywords**:" stays as written
        text = _BULLET.sub("", text, count=1).strip()
        key = text.casefold()
        if text and not _has_control(text) and key not in seen:
            seen.add(key)
            out.append(text)
    return out


class StructuredSummary(BaseModel):
    """What a summarizer produces: summary text, key facts, entities/keywords, tags.

    Built from an LLM's JSON answer, so it is lenient where that is harmless (unknown keys
    are ignored, a string where a list belongs is split into lines, duplicates and blank
    items are dropped, tags are normalised) and strict where it matters: ``summary`` must
    not be empty.
    """

    model_config = ConfigDict(extra="ignore", validate_assignment=True)

    summary: str
    key_facts: list[str] = Field(default_factory=list)
    entities: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)

    @field_validator("summary", mode="before")
    @classmethod
    def _summary(cls, value: Any) -> str:
        if isinstance(value, (list, tuple)):
            value = "\n".join(f"- {item}" for item in _items(value))
        if not isinstance(value, str) or not value.strip():
            raise ValueError("summary text must be a non-empty string")
        return value.strip()

    @field_validator("key_facts", "entities", mode="before")
    @classmethod
    def _lines(cls, value: Any) -> list[str]:
        return _items(value)

    @field_validator("tags", mode="before")
    @classmethod
    def _tags(cls, value: Any) -> list[str]:
        out: list[str] = []
        for item in _items(value):
            tag = "-".join(item.casefold().lstrip("#").split())
            tag = "".join(ch for ch in tag if ch not in _TAG_DROP).strip("-")
            if tag and len(tag) <= 40 and tag not in out:
                out.append(tag)
        return out[:8]


class Session(_Model):
    """A whole conversation session: metadata, interactions in order, optional summary."""

    id: str
    created: datetime
    last_active: datetime
    participants: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    project: str | None = None
    links: list[str] = Field(default_factory=list)
    extra: dict[str, str] = Field(default_factory=dict)
    interactions: list[Interaction] = Field(default_factory=list)
    summary: Summary | None = None
    language: Language = "en"

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        return check_value(value, "session id") if value else _empty_id()

    @field_validator("created", "last_active")
    @classmethod
    def _ts(cls, value: datetime) -> datetime:
        return as_aware(value)

    @field_validator("participants", "tags")
    @classmethod
    def _labels(cls, value: list[str]) -> list[str]:
        for item in value:
            check_label(item, "participant/tag")
            if "," in item:
                raise ValueError(f"participant/tag may not contain a comma: {item!r}")
        return value

    @field_validator("links")
    @classmethod
    def _links(cls, value: list[str]) -> list[str]:
        for item in value:
            check_value(item, "link")
            if not item or "]]" in item or "[[" in item or "," in item:
                raise ValueError(f"link {item!r} is not a session id: write x or [[x]]")
        return value

    @field_validator("project")
    @classmethod
    def _project(cls, value: str | None) -> str | None:
        return None if value is None else check_label(value, "project")

    @field_validator("extra")
    @classmethod
    def _extra(cls, value: dict[str, str]) -> dict[str, str]:
        for key, item in value.items():
            check_label(key, "metadata key")
            if ":" in key:
                raise ValueError(f"metadata key may not contain ':': {key!r}")
            if key.casefold() in RESERVED_METADATA_KEYS:
                raise ValueError(
                    f"metadata key {key!r} is a built-in field; set that field instead"
                )
            check_value(item, f"metadata value of {key!r}")
        return value

    @field_validator("interactions")
    @classmethod
    def _unique_ids(cls, value: list[Interaction]) -> list[Interaction]:
        seen: set[str] = set()
        for item in value:
            if item.id in seen:
                raise ValueError(f"duplicate interaction id {item.id!r}")
            seen.add(item.id)
        return value

    def interaction(self, interaction_id: str) -> Interaction | None:
        """The interaction with that id, or None."""
        for item in self.interactions:
            if item.id == interaction_id:
                return item
        return None


def read_session(fields: dict[str, Any]) -> Session:
    """``Session(**fields)`` for fields a file's reader made (each of its field's type),
    checked by the model's own field validators but made without pydantic's validator,
    which a new process would first build: longer than reading a 400-turn session. Raises
    ValueError where a validator would."""
    values: dict[str, Any] = {
        "participants": [],
        "tags": [],
        "project": None,
        "links": [],
        "extra": {},
        "interactions": [],
        "summary": None,
        "language": "en",
        **fields,
    }
    values["id"] = Session._id(values["id"])
    values["created"] = Session._ts(values["created"])
    values["last_active"] = Session._ts(values["last_active"])
    Session._labels(values["participants"])
    Session._labels(values["tags"])
    Session._links(values["links"])
    values["project"] = Session._project(values["project"])
    Session._extra(values["extra"])
    Session._unique_ids(values["interactions"])
    return built(Session, values)


class SessionInfo(NamedTuple):
    """A session as a listing shows it: its metadata, how many turns its file holds and its
    summary's text, without the turns (``list_session_infos`` reads it from the search
    index's session rows, not from the file). A named tuple: a listing builds ten thousand
    of them, four times faster than a frozen dataclass, and as immutable."""

    id: str
    created: datetime
    last_active: datetime
    participants: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    project: str | None = None
    links: tuple[str, ...] = ()
    extra: Mapping[str, str] = MappingProxyType({})
    interactions: int = 0  # in the session's file and parts (not its archive part)
    summary: str | None = None  # the summary's text; None: no summary
    language: Language = "en"

    @property
    def title(self) -> str | None:
        return self.extra.get("title")

    @classmethod
    def of(cls, session: Session) -> SessionInfo:
        """The listing of a parsed session."""
        return cls(
            session.id,
            session.created,
            session.last_active,
            tuple(session.participants),
            tuple(session.tags),
            session.project,
            tuple(session.links),
            dict(session.extra),
            len(session.interactions),
            None if session.summary is None else session.summary.text,
            session.language,
        )


def _empty_id() -> str:
    raise ValueError("session id may not be empty")


class Revision(_Model):
    """One commit as the audit trail sees it."""

    sha: str
    time: datetime
    author: str
    email: str = ""
    op: str | None = None
    sessions: list[str] = Field(default_factory=list)
    agent: str | None = None
    model: str | None = None
    subject: str = ""
    message: str = ""
    trailers: dict[str, list[str]] = Field(default_factory=dict)
    # session id -> what the commit changed in it ("added interaction i3", "changed summary");
    # filled by ``history(..., changes=True)``
    changes: dict[str, list[str]] = Field(default_factory=dict)


class Hit(_Model):
    """One search result: where it is, how well it matched and why."""

    session_id: str
    interaction_id: str | None = None
    score: float
    snippet: str
    commit: str | None = None
    kind: Literal["interaction", "summary", "fact"] = "interaction"  # fact: no session_id
    speaker: str | None = None
    timestamp: datetime | None = None
    components: dict[str, float] = Field(default_factory=dict)


MetadataValue = str | list[str] | None


class FieldChange(_Model):
    """A value before and after (None: absent)."""

    old: MetadataValue = None
    new: MetadataValue = None


class SessionDiff(_Model):
    """How one session differs between two revisions: the Markdown text and its meaning.

    ``metadata`` keys are ``Session`` field names (``tags``, ``last_active``...) and custom
    keys as ``extra:<key>``; ``summary`` holds the old and new summary text.
    """

    session_id: str
    path: str
    status: Literal["added", "removed", "modified"]
    interactions_added: list[str] = Field(default_factory=list)
    interactions_removed: list[str] = Field(default_factory=list)
    interactions_changed: list[str] = Field(default_factory=list)
    metadata: dict[str, FieldChange] = Field(default_factory=dict)
    summary: FieldChange | None = None
    unified: str = ""
    problems: list[str] = Field(default_factory=list)

    def labels(self) -> list[str]:
        """Short human descriptions of each change, in file order."""
        out = [] if self.status == "modified" else [f"{self.status} session"]
        out += [f"added interaction {i}" for i in self.interactions_added]
        out += [f"removed interaction {i}" for i in self.interactions_removed]
        out += [f"changed interaction {i}" for i in self.interactions_changed]
        if self.summary is not None:
            verb = "added" if self.summary.old is None else "changed"
            out.append(f"{'removed' if self.summary.new is None else verb} summary")
        if self.status == "modified":
            out += [f"changed metadata {key}" for key in self.metadata]
        out += self.problems
        return out


class FactDiff(_Model):
    """How a curated memory file differs between two revisions, by fact id."""

    path: str
    status: Literal["added", "removed", "modified"]
    added: list[str] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list)
    changed: list[str] = Field(default_factory=list)
    unified: str = ""
    problems: list[str] = Field(default_factory=list)

    def labels(self) -> list[str]:
        """Short human descriptions of each change ("added fact f1a2b3c")."""
        return (
            [f"added fact {i}" for i in self.added]
            + [f"removed fact {i}" for i in self.removed]
            + [f"changed fact {i}" for i in self.changed]
            + self.problems
        )


class Diff(_Model):
    """Differences between revisions ``a`` and ``b`` (one session or the whole store);
    ``files`` lists the changed files that are not sessions, ``facts`` the memory files
    among them by fact id."""

    a: str | None
    b: str
    sessions: list[SessionDiff] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list)
    facts: list[FactDiff] = Field(default_factory=list)

    @property
    def unified(self) -> str:
        """The unified diff of every changed session (and memory) file, like ``git diff``."""
        return "".join(s.unified for s in self.sessions) + "".join(f.unified for f in self.facts)


class BlameEntry(_Model):
    """Who last changed one interaction (or the summary) of a session, and when."""

    kind: Literal["interaction", "summary"]
    interaction_id: str | None = None
    sha: str
    time: datetime
    author: str
    agent: str | None = None
    model: str | None = None
    op: str | None = None
    subject: str = ""


class UndoResult(_Model):
    """What ``revert_where`` undid (or, on a dry run, would undo)."""

    dry_run: bool
    commit: str | None = None
    reverted: list[Revision] = Field(default_factory=list)
    sessions: list[SessionDiff] = Field(default_factory=list)
    facts: list[FactDiff] = Field(default_factory=list)  # the memory files, by fact id


SummaryStatus = Literal["committed", "review", "refused", "failed"]


class SummaryOutcome(Result):
    """What one automatic or idle summary attempt did (they never raise); an attempt fills
    it in as it goes (commit, then status and error)."""

    session_id: str
    status: SummaryStatus
    trigger: str
    reason: str = ""
    commit: str | None = None
    model: str | None = None
    fallback: str | None = None
    error: str | None = None
    report: dict[str, Any] | None = None

    # positional too, as the dataclass this model replaced: the summary methods build it so
    # (``**dict``: mypy checks this signature, and knows no fields of the base's ``__init__``)
    def __init__(
        self,
        session_id: str,
        status: SummaryStatus,
        trigger: str,
        reason: str = "",
        commit: str | None = None,
        model: str | None = None,
        fallback: str | None = None,
        error: str | None = None,
        report: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(
            **dict(
                session_id=session_id,
                status=status,
                trigger=trigger,
                reason=reason,
                commit=commit,
                model=model,
                fallback=fallback,
                error=error,
                report=report,
            )
        )


class Review(Result):  # mutable as the dataclass it replaced
    """A summary waiting on a review branch."""

    session_id: str
    branch: str
    commit: str
    parent: str
    subject: str
    message: str = ""
    diff: str = ""

    # positional too, as the dataclass this model replaced: the summary methods build it so
    def __init__(
        self,
        session_id: str,
        branch: str,
        commit: str,
        parent: str,
        subject: str,
        message: str = "",
        diff: str = "",
    ) -> None:
        super().__init__(
            **dict(
                session_id=session_id,
                branch=branch,
                commit=commit,
                parent=parent,
                subject=subject,
                message=message,
                diff=diff,
            )
        )


class BatchResult(Result):
    """What ``with mm.batch(...) as b`` gives: ``b.commit`` is set when the block ends."""

    commit: str | None = None
