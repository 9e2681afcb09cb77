"""Names that vulture reports as unused but that are used from outside Python's view.

.ci/run runs ``vulture gitmem tests/vulture_whitelist.py --min-confidence 60``; it must print
nothing. Each entry says who uses the name: click (commands, hooks), pydantic (validators,
config), mistune (parser hooks), Python itself (module ``__getattr__``), or the public API
(documented in the README or tested, but not called inside gitmem).
"""

# ruff: noqa: B018  (every line is a reference for vulture, not a statement)

from typing import Any

import gitmem
from gitmem.cli import base, coders, facts, history, serve, sessions, sharing
from gitmem.format import html, render, spans, turns
from gitmem.format.facts import Fact
from gitmem.guard.secrets import SecretConfig
from gitmem.importers.live import Capture
from gitmem.importers.nanobot_live import GitmemCapture
from gitmem.llm.config import LLMConfig
from gitmem.manager import MemoryManager
from gitmem.models import (
    USER_SPEAKERS,
    Result,
    Session,
    StructuredSummary,
    Summary,
    _Model,
)
from gitmem.search.catchup import SyncReport
from gitmem.web.links import Node

# click: commands registered by decorators, and the hooks click calls
coders.import_claude_code
coders.import_codex
coders.import_gemini_cli
coders.hooks_print
history.log_
history.diff_
sessions.save
sessions.show
sessions.list_
sessions.demo
facts.edit
facts.pin
facts.unpin
serve.mcp
serve.web
sharing.remote_list
sharing.merge_file_command
sharing.hook
sharing.hooks_install
base.GitmemGroup.command_class
base.GitmemGroup.group_class
base._JsonError.show
base.cli.commands  # click reads a group's commands mapping

# live capture: a counter the caller reads (tests, a plugin's status)
Capture.imports

# Python: a module-level __getattr__ loads the manager lazily
gitmem.__getattr__

# the manager's parts that only its one-line delegations reach (by name: _Call("_history", ...))
MemoryManager._history
MemoryManager._sync

# pydantic: model configuration and field validators
_Model.model_config
Result.model_config
StructuredSummary.model_config
Summary._ts
Summary._model
Summary._covers
StructuredSummary._summary
StructuredSummary._tags
Session._ts
Session._unique_ids
Fact._one_provenance
Fact._plain_id
Fact._section_name
Fact._percent

# mistune: the block parser's state class and the rule it calls by name
spans.SpanParser.state_cls
spans.SpanParser.parse_block_quote
html._SafeRenderer.wiki_link  # mistune calls the inline rule by name

# the public API: documented or tested, not called inside gitmem
Session.interaction
USER_SPEAKERS
SecretConfig.with_patterns
LLMConfig.worst_case_seconds
SyncReport(commit=None).rebuilt

# for tests and benchmarks/bench_huge.py: time and check a parse or render from scratch
render.clear_cache
turns.CACHE.clear

# entry points and templates: nanobot loads the plugin class by its entry point; the links
# graph template reads each node's degree; the live capture's counter is read by its callers
GitmemCapture
Node.degree
Capture.failures

# attributes set on generated functions, protocol methods Python calls by name (any object)
_: Any = None
_.__doc__
_.create_module  # importlib's loader protocol
_.exec_module

# public API: RankConfig.tuned (flat overrides, documented in docs/retrieval.md); the
# LoCoMo scorer in benchmarks/ maps an evidence id to its session
_.tuned
_.session_of

# for tests: a posting key taken apart; the object caches dropped (as a fork must)
_.split_key
_.forget_trees

# dead, as far as vulture and grep can tell, in code other work is restructuring right now
# (store, search, the locomo scorer, the 0.1 exports): to delete there, then drop from here
_.TAIL  # search postings: only MAIN is read
_.idf_of  # summary/extractive.py: kept only because 0.1 exported it
_.Loader  # oldpaths.py: used in a string cast only
