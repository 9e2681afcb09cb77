"""What one conversation of a chat transcript says: its messages, in the two shapes gitmem
reads (OpenAI Chat Completions messages, ChatGPT export trees), and its times.

:mod:`gitmem.importers.chat` finds the conversations in a file and turns them into
sessions; this module turns one conversation's JSON into :class:`Item` s (role, speaker,
text, time) and says what is wrong with it, naming the message or node. Kept apart because
these are the rules a reader checks against the formats: how content parts, tool calls,
images and ChatGPT's hidden or edited-away nodes become text, and how epoch and ISO times
are read.
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import Any

from gitmem.importers.engine import ImportFormatError
from gitmem.importers.engine import time_zone as engine_time_zone
from gitmem.models import check_label

# roles a messages array names as they are; any other speaker is a "user" with that name
ROLES = ("user", "assistant", "system", "tool", "developer", "function")

# keys a message or conversation may give its time under, in order of preference
_TIME_KEYS = ("created", "create_time", "timestamp", "created_at")

# epoch values above this are taken as milliseconds (it is the year 5138 in seconds)
_MILLIS = 1e11

_DROP = ("Cc", "Cs", "Zl", "Zp")


@dataclass
class Item:
    """One message: its role (grouping turns), the speaker gitmem stores, its text, and the
    time the file gives it (None when it gives none)."""

    role: str
    speaker: str
    content: str
    when: datetime | None


def openai_items(
    where: str, messages: list[Any], zone: tzinfo | None, times: Any = None
) -> list[Item]:
    """The messages of a Chat Completions ``messages`` array; ``where`` is the
    conversation's ``file:line`` for errors. ``times``: the ``timestamps`` array beside
    the messages that ``gitmem export chat`` writes (one time or null per message)."""
    given = times if isinstance(times, list) and len(times) == len(messages) else []
    items: list[Item] = []
    for at, message in enumerate(messages, 1):
        here = f"message {at}"
        if not isinstance(message, dict):
            raise ImportFormatError(
                where, f"{here}: expected an object {{role, content}}, found {shape(message)}"
            )
        role = _role(where, here, message.get("role"))
        lines = [_openai_content(where, here, message.get("content"))]
        calls = message.get("tool_calls") or []
        if not isinstance(calls, list):
            raise ImportFormatError(where, f"{here}: tool_calls must be an array")
        if isinstance(message.get("function_call"), dict):  # the older single-call form
            calls = [*calls, {"function": message["function_call"]}]
        lines += [_tool_call(where, here, call) for call in calls]
        content = "\n".join(line for line in lines if line)
        if not content:
            continue  # an empty message (e.g. a null content without calls) says nothing
        name = message.get("name")
        speaker = _speaker(role)
        if role == "user" and isinstance(name, str) and _label(name):
            speaker = name
        when = _message_time(where, here, message, zone)
        if when is None and given and given[at - 1] is not None:
            when = _when(where, f"{here}: timestamps", given[at - 1], zone)
        items.append(Item(role, speaker, content, when))
    return items


def _role(where: str, here: str, role: Any) -> str:
    if role in ROLES:  # the common case, without checking it as a label
        return str(role)
    if not isinstance(role, str) or not _label(role.strip()):
        found = repr(role[:40]) if isinstance(role, str) else shape(role)
        raise ImportFormatError(
            where, f'{here}: "role" must be a name such as user or assistant, found {found}'
        )
    return role.strip().lower() if role.strip().lower() in ROLES else role.strip()


def _speaker(role: str) -> str:
    """A role as gitmem names speakers (``User``, ``Assistant``, as ``save`` does)."""
    return role.capitalize() if role in ROLES else role


def _label(text: str) -> bool:
    try:
        check_label(text, "speaker")
    except ValueError:
        return False
    return len(text) <= 100


def _openai_content(where: str, here: str, content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ImportFormatError(
            where,
            f"{here}: content must be a string, null or a list of parts, found {shape(content)}",
        )
    out: list[str] = []
    for part in content:
        if isinstance(part, str):
            out.append(part)
        elif not isinstance(part, dict):
            raise ImportFormatError(where, f"{here}: a content part is {shape(part)}")
        elif part.get("type") in ("text", "input_text", "output_text"):
            out.append(str(part.get("text") or ""))
        elif part.get("type") == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            out.append(f"[image: {_short_url(str(url or ''))}]")
        elif part.get("type") == "refusal":
            out.append(str(part.get("refusal") or ""))
        else:
            out.append(f"[{part.get('type') or 'part'}]")
    return "\n".join(text for text in out if text)


def _short_url(url: str) -> str:
    # an inline image (data: URL) would put megabytes of base64 into the memory
    if url.startswith("data:"):
        head = url.split(",", 1)[0]
        return f"{head} ({len(url)} characters)"
    return url


def _tool_call(where: str, here: str, call: Any) -> str:
    if not isinstance(call, dict):
        raise ImportFormatError(where, f"{here}: a tool call is {shape(call)}")
    given = call.get("function")
    function: dict[str, Any] = given if isinstance(given, dict) else {}
    name = function.get("name") or call.get("name") or call.get("type") or "tool"
    args = function.get("arguments", call.get("arguments"))
    if args is not None and not isinstance(args, str):
        args = json.dumps(args, ensure_ascii=False, sort_keys=True)
    return f"[tool: {name} {args}]" if args else f"[tool: {name}]"


def chatgpt_items(where: str, data: dict[str, Any], zone: tzinfo | None) -> list[Item]:
    """The visible messages of a ChatGPT export conversation, on the branch shown last."""
    mapping: dict[str, Any] = data["mapping"]
    for key, node in mapping.items():
        if not isinstance(node, dict):
            raise ImportFormatError(
                where, f"mapping node {key!r}: expected an object, found {shape(node)}"
            )
    items: list[Item] = []
    for node_id in _branch(where, mapping, data.get("current_node")):
        node = mapping[node_id]
        message = node.get("message") if isinstance(node, dict) else None
        if not isinstance(message, dict):
            continue
        metadata = message.get("metadata") or {}
        if isinstance(metadata, dict) and metadata.get("is_visually_hidden_from_conversation"):
            continue
        if message.get("weight") == 0:  # ChatGPT does not show a message of weight 0
            continue
        here = f"node {node_id!r}"
        author = message.get("author") or {}
        role = _role(where, here, author.get("role") if isinstance(author, dict) else None)
        content = _chatgpt_content(message.get("content"))
        recipient = message.get("recipient")
        if role == "assistant" and content and recipient not in (None, "", "all"):
            content = f"[tool: {recipient} {content}]"
        if content:
            items.append(
                Item(role, _speaker(role), content, _message_time(where, here, message, zone))
            )
    return items


def _branch(where: str, mapping: dict[str, Any], current: Any) -> list[str]:
    """The node ids from the root to ``current`` (the branch shown last)."""
    if current is None:
        roots = [
            key
            for key, node in mapping.items()
            if isinstance(node, dict) and node.get("parent") in (None, "")
        ]
        if not roots:
            return []
        current = roots[0]
        below: set[str] = {current}
        while True:  # no current node: follow the newest (last) child down
            node = mapping[current]
            children = node.get("children") if isinstance(node, dict) else None
            if not isinstance(children, list):
                break
            children = [c for c in children if isinstance(c, str) and c in mapping]
            if not children:
                break
            current = children[-1]
            if current in below:
                raise ImportFormatError(where, f"node {current!r} is its own descendant")
            below.add(current)
    path: list[str] = []
    seen: set[str] = set()
    while current not in (None, ""):
        if not isinstance(current, str) or current not in mapping:
            raise ImportFormatError(where, f"node {current!r} is not in the mapping")
        if current in seen:
            raise ImportFormatError(where, f"node {current!r} is its own ancestor")
        seen.add(current)
        path.append(current)
        node = mapping[current]
        current = node.get("parent") if isinstance(node, dict) else None
    path.reverse()
    return path


def _chatgpt_content(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, dict):
        return ""
    parts = content.get("parts")
    if isinstance(parts, list):
        out: list[str] = []
        for part in parts:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict):
                kind = str(part.get("content_type") or "part")
                pointer = part.get("asset_pointer")
                if "image" in kind and pointer:
                    out.append(f"[image: {pointer}]")
                elif isinstance(part.get("text"), str):
                    out.append(part["text"])
                else:
                    out.append(f"[{kind}]")
        return "\n".join(text for text in out if text)
    for key in ("text", "result"):
        if isinstance(content.get(key), str):
            return str(content[key])
    named = content.get("content_type")
    return f"[{named}]" if isinstance(named, str) and named else ""


# --- times --------------------------------------------------------------------------------


def time_zone(tz: str | tzinfo | None) -> tzinfo | None:
    """``tz`` as a zone: a ``tzinfo`` as it is, a name through the importers' one parser."""
    return tz if isinstance(tz, tzinfo) else engine_time_zone(tz)


def _message_time(
    where: str, here: str, message: dict[str, Any], zone: tzinfo | None
) -> datetime | None:
    for key in _TIME_KEYS:
        if message.get(key) is not None:
            return _when(where, f"{here}: {key}", message[key], zone)
    return None


def conversation_time(
    where: str, data: dict[str, Any], keys: tuple[str, ...], zone: tzinfo | None
) -> datetime | None:
    for key in keys:
        if data.get(key) is not None:
            return _when(where, key, data[key], zone)
    return None


def _when(where: str, what: str, value: Any, zone: tzinfo | None) -> datetime:
    """Epoch seconds (milliseconds when huge) or an ISO date-time, in whole seconds; a
    naive one is in ``zone`` (None: this machine's zone)."""
    try:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            seconds = value / 1000 if abs(value) > _MILLIS else value
            return datetime.fromtimestamp(int(seconds), UTC)
        if isinstance(value, str):
            stamp = datetime.fromisoformat(value.strip()).replace(microsecond=0)
            if stamp.tzinfo is None:
                stamp = stamp.replace(tzinfo=zone) if zone else stamp.astimezone()
            return stamp
    except (ValueError, OverflowError, OSError):
        pass
    shown = repr(value) if len(repr(value)) <= 40 else "a long value"
    raise ImportFormatError(where, f"{what} {shown} is not epoch seconds or an ISO date-time")


def title_of(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    text = " ".join(
        "".join(ch for ch in value if unicodedata.category(ch) not in _DROP or ch.isspace()).split()
    )
    return text[:200].strip() or None


def shape(value: Any) -> str:
    if isinstance(value, dict):
        keys = ", ".join(repr(k) for k in list(value)[:5])
        return f"an object with keys {keys}" if keys else "an empty object"
    return {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )
