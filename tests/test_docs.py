"""README.md and docs/*.md checked against the code, so the user's manual cannot drift.

Every page is read as a reader would read it: the `gitmem ...` command lines (code blocks and
inline code) must name real commands and options of the click tree, the `mm.<method>(` calls
real `MemoryManager` methods, every `gitmem.x.y` path a module or name that imports, every
`gitmem.<section>.<key>` config key one the code accepts, and every link a page and heading that
exist.
"""

from __future__ import annotations

import importlib
import re
import shlex
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

CONFIG_SECTIONS = ("summary", "llm", "secrets", "facts", "embed")
SHELL_BLOCKS = {"", "sh", "bash", "shell", "console"}


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


def rel(page: Path) -> str:
    return str(page.relative_to(ROOT))


def split_code(text: str) -> tuple[list[tuple[str, str]], str]:
    """The fenced blocks (language, body) and the text with them blanked out."""
    blocks: list[tuple[str, str]] = []

    def keep(match: re.Match[str]) -> str:
        blocks.append((match.group(1), match.group(2)))
        return "\n" * match.group(0).count("\n")

    return blocks, re.sub(r"^```(\w*)\n(.*?)^```$", keep, text, flags=re.M | re.S)


def shell_snippets(text: str) -> list[str]:
    """Every piece of text a reader could type: shell blocks, indented blocks, inline code."""
    blocks, prose = split_code(text)
    snippets = [line for lang, body in blocks if lang in SHELL_BLOCKS for line in body.splitlines()]
    previous = ""
    for line in prose.splitlines():
        if line.startswith("    ") and (previous == "" or previous.startswith("    ")):
            snippets.append(line.strip())
            previous = line
        else:
            previous = line.strip()
    snippets += [" ".join(span.split()) for span in re.findall(r"`([^`]+)`", prose)]
    return snippets


def command_lines(text: str) -> list[list[str]]:
    """The words after each `gitmem` command in the page (up to `&&`, `|`, `;` or `#`)."""
    found = []
    for snippet in shell_snippets(text):
        for match in re.finditer(r"(?<![\w./-])gitmem\s+(.+)", snippet):
            rest = re.split(r"\s(?:&&|\|\|?|;|#)\s", match.group(1))[0]
            try:
                words = shlex.split(rest)
            except ValueError:
                words = rest.split()
            found.append(words)
    return found


def find_option(command: click.Command, name: str) -> click.Option | None:
    for param in command.params:
        if isinstance(param, click.Option) and name in (*param.opts, *param.secondary_opts):
            return param
    return None


def command_problems(words: list[str]) -> list[str]:
    """What is wrong with `gitmem <words>` against the click tree (empty: nothing)."""
    from gitmem.cli import cli

    command: click.Command = cli
    path = "gitmem"
    skip_value = False
    for raw in words:
        word = raw.strip("[]")
        if skip_value or not word:
            skip_value = False
            continue
        if re.fullmatch(r"--?[A-Za-z][\w-]*(?:/--?[A-Za-z][\w-]*)*(?:=.*)?", word):
            names = word.split("=")[0].split("/")
            for name in names:
                option = find_option(command, name)
                if option is None and name != "--help":
                    return [f"`{path}` has no option {name}"]
                skip_value = (
                    option is not None
                    and not option.is_flag
                    and "=" not in word
                    and len(names) == 1
                )
        elif isinstance(command, click.Group) and re.fullmatch(r"[a-z][a-z0-9-]*", word):
            if word not in command.commands:
                return [f"`{path}` has no command {word!r}"]
            command = command.commands[word]
            path += f" {word}"
    return []


def test_every_command_line_names_real_commands_and_options() -> None:
    problems = []
    checked = 0
    for page in pages():
        for words in command_lines(page.read_text()):
            checked += 1
            problems += [
                f"{rel(page)}: gitmem {' '.join(words)}: {p}" for p in command_problems(words)
            ]
    assert checked > 60, "the pages should show the CLI"
    assert not problems, "\n".join(problems)


def test_mm_calls_are_memory_manager_methods() -> None:
    from gitmem import MemoryManager

    problems = []
    for page in pages():
        text = page.read_text()
        for name in re.findall(r"(?<![\w.])(?:mm|MemoryManager)\.(\w+)\(", text):
            if not callable(getattr(MemoryManager, name, None)):
                problems.append(f"{rel(page)}: MemoryManager has no method {name}")
    assert not problems, "\n".join(problems)


def resolve(path: str) -> object:
    """The module or object a dotted `gitmem...` path names; raises if it names nothing."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(path)


def config_problem(section: str, key: str) -> str | None:
    """Why the code does not accept `gitmem.<section>.<key>`, or None if it does."""
    from gitmem.errors import ConfigError
    from gitmem.facts.proposal import FactsConfig
    from gitmem.guard.secrets import SecretConfig
    from gitmem.llm.config import llm_budget
    from gitmem.llm.embeddings import EmbedConfig
    from gitmem.summary.triggers import SummaryConfig

    full = f"gitmem.{section}.{key}"
    try:
        if section == "summary":
            SummaryConfig.from_git({full: "x"})
        elif section == "llm":
            llm_budget({}, {full: "x"})
        elif section == "facts":
            FactsConfig.from_git({full: "x"})
        elif section == "embed":
            EmbedConfig.from_env({}, git={full: "x"})
        else:
            SecretConfig.from_git([(full, "kind=x")])
    except (ConfigError, ValueError) as exc:
        if str(exc).startswith("unknown setting"):
            return str(exc)
    return None


def dotted_paths(text: str) -> list[str]:
    return re.findall(r"(?<![\w./-])gitmem(?:\.[A-Za-z_]\w*)+(?![\w-]|\.[*<])", text)


def path_problems(page: Path, text: str) -> list[str]:
    problems = []
    for path in dotted_paths(text):
        parts = path.split(".")
        if len(parts) == 3 and parts[1] in CONFIG_SECTIONS and parts[2][:1].islower():
            try:
                importlib.import_module(path)  # a module of that name wins
                continue
            except ModuleNotFoundError:
                problem = config_problem(parts[1], parts[2])
                if problem:
                    problems.append(f"{rel(page)}: config key {path}: {problem}")
                continue
        try:
            resolve(path)
        except (ImportError, AttributeError) as exc:
            problems.append(f"{rel(page)}: {path} does not import: {exc}")
    for section in re.findall(r"(?<![\w./-])gitmem\.(\w+)\.(?:\*|<)", text):
        if section not in CONFIG_SECTIONS:
            problems.append(f"{rel(page)}: gitmem.{section}.* is no config section")
    return problems


def test_module_paths_and_config_keys_are_real() -> None:
    problems = []
    for page in pages():
        problems += path_problems(page, page.read_text())
    assert not problems, "\n".join(problems)


def test_imports_shown_work() -> None:
    problems = []
    for page in pages():
        for module, names in re.findall(
            r"^from (gitmem[\w.]*) import ([\w, ]+)$", page.read_text(), flags=re.M
        ):
            for name in names.split(","):
                try:
                    resolve(f"{module}.{name.strip()}")
                except (ImportError, AttributeError) as exc:
                    problems.append(f"{rel(page)}: from {module} import {name.strip()}: {exc}")
    assert not problems, "\n".join(problems)


def test_every_summary_and_llm_setting_is_documented() -> None:
    from gitmem.llm.config import LLM_KEYS
    from gitmem.summary.triggers import SUMMARY_KEYS

    text = (DOCS / "summaries.md").read_text()
    missing = [key for key in SUMMARY_KEYS.values() if f"`{key}`" not in text]
    missing += [f"gitmem.llm.{key}" for key in LLM_KEYS if f"`gitmem.llm.{key}`" not in text]
    assert not missing, f"docs/summaries.md does not document {missing}"


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    _, prose = split_code(page.read_text())
    return {slug(h) for h in re.findall(r"^#{1,6} (.+)$", prose, flags=re.M)}


def test_links_reach_pages_and_headings() -> None:
    problems = []
    for page in pages():
        _, prose = split_code(page.read_text())
        for target in re.findall(r"\]\(([^)\s]+)\)", prose):
            if re.match(r"\w+://", target):
                continue
            file, _, anchor = target.partition("#")
            linked = (page.parent / file).resolve() if file else page
            if not linked.is_file():
                problems.append(f"{rel(page)}: link to missing {target}")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                problems.append(f"{rel(page)}: no heading #{anchor} in {rel(linked)}")
    assert not problems, "\n".join(problems)


def test_readme_links_every_docs_page() -> None:
    readme = (ROOT / "README.md").read_text()
    pages_ = sorted(DOCS.glob("*.md"))
    assert len(pages_) >= 8
    missing = [p.name for p in pages_ if f"](docs/{p.name})" not in readme]
    assert not missing, f"README.md does not link {missing}"


def package_map() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Package map", 1)[1].split("\n## ", 1)[0]
    block = split_code(section)[0][0][1]
    return re.findall(r"^\s*(\w+(?:\.py|/))", block, flags=re.M)


def test_package_map_names_every_package_and_top_module() -> None:
    named = package_map()
    package = ROOT / "gitmem"
    real = {p.name + "/" for p in package.iterdir() if (p / "__init__.py").is_file()}
    real |= {p.name for p in package.glob("*.py") if not p.name.startswith("__")}
    assert "gitmem/" in named
    named_here = set(named) - {"gitmem/"}
    missing_files = named_here - real
    assert not missing_files, f"package map names missing {missing_files}"
    assert not real - named_here, f"package map does not name {real - named_here}"
