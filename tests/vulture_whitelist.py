"""Names that vulture reports as unused but that are used from outside Python's view.

Run: ``vulture gitmem tests/vulture_whitelist.py`` (``pip install vulture``); it should print
nothing. Each entry says who uses the name: click (commands, hooks), pydantic (validators,
config), mistune (parser hooks), Python itself (module ``__getattr__``), or the public API
(documented in the README or tested, but not called inside gitmem).
"""

# ruff: noqa: B018  (every line is a reference for vulture, not a statement)

import gitmem
from gitmem.cli import base, history, sessions, sharing
from gitmem.format import render, spans, turns
from gitmem.guard.secrets import SecretConfig
from gitmem.llm.config import LLMConfig
from gitmem.models import (
    USER_SPEAKERS,
    Result,
    Session,
    StructuredSummary,
    Summary,
    _Model,
)
from gitmem.search.catchup import SyncReport

# click: commands registered by decorators, and the hooks click calls
history.log_
history.diff_
sessions.save
sessions.show
sessions.list_
sessions.demo
sharing.remote_list
sharing.merge_file_command
sharing.hook
sharing.hooks_install
base.GitmemGroup.command_class
base.GitmemGroup.group_class
base._JsonError.show

# Python: a module-level __getattr__ loads the manager lazily
gitmem.__getattr__

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

# mistune: the block parser's state class and the rule it calls by name
spans.SpanParser.state_cls
spans.SpanParser.parse_block_quote

# the public API: documented or tested, not called inside gitmem
Session.interaction
USER_SPEAKERS
SecretConfig.with_patterns
LLMConfig.worst_case_seconds
SyncReport(commit=None).rebuilt

# for tests and benchmarks/bench_huge.py: time and check a parse or render from scratch
render.clear_cache
turns.CACHE.clear
