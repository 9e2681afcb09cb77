"""The README's Python blocks run as written: in order, in one interpreter, in an empty folder,
offline and with no API key, as a reader would paste them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
README_LINES_MAX = 200

# each block runs in the namespace the blocks before it left, under its own name in tracebacks
RUNNER = """\
import sys
namespace = {"__name__": "__main__"}
for path in sys.argv[1:]:
    with open(path, encoding="utf-8") as block:
        exec(compile(block.read(), path, "exec"), namespace)
"""


def python_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", README.read_text(), flags=re.M | re.S)


def offline_env(home: Path) -> dict[str, str]:
    """This environment without any LLM or embedding settings, git identity or proxy, and
    with every HTTP request sent to a closed port."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GITMEM_", "OPENAI_", "GIT_")) and "PROXY" not in k.upper()
    }
    closed = "http://127.0.0.1:9"
    env |= {"HOME": str(home), "HTTP_PROXY": closed, "HTTPS_PROXY": closed}
    env |= {"http_proxy": closed, "https_proxy": closed, "PYTHONPATH": str(ROOT)}
    return env


def test_readme_is_short() -> None:
    lines = len(README.read_text().splitlines())
    assert lines <= README_LINES_MAX, f"README.md has {lines} lines, at most {README_LINES_MAX}"


def test_readme_python_blocks_run_in_an_empty_folder(tmp_path: Path) -> None:
    blocks = python_blocks()
    assert blocks, "the README shows Python"
    work = tmp_path / "work"
    scripts = tmp_path / "blocks"
    home = tmp_path / "home"
    for folder in (work, scripts, home):
        folder.mkdir()
    paths = []
    for n, code in enumerate(blocks, 1):
        path = scripts / f"readme_block_{n}.py"
        path.write_text(code)
        paths.append(str(path))
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, *paths],
        cwd=work,
        env=offline_env(home),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"a README block failed:\n{done.stdout}\n{done.stderr}"


# gitmem is on no package index (and `gitmem` there is another project): every install line
# must name this checkout, a path or a URL, never the distribution by name
UNPUBLISHED = re.compile(r"^(?:gitmem|gitmem-store)(?:\[[\w,]*\])?(?:[<>=!~].*)?$")


def install_targets(text: str) -> list[str]:
    """What each ``pip install ...`` / ``--with ...`` in the text would install."""
    targets = []
    for match in re.finditer(r"(?:pip install|--with)((?:[ \t]+[^\s`\"&|;#)]+)+)", text):
        words = [w.strip("'\"").rstrip(",") for w in match.group(1).split()]
        targets += [w for w in words if w and not w.startswith("-")]
    return targets


def test_every_install_line_works_from_a_checkout() -> None:
    files = [README, *sorted((ROOT / "docs").glob("*.md")), *sorted(ROOT.glob("gitmem/**/*.py"))]
    bad = [
        f"{path.relative_to(ROOT)}: pip install {target}"
        for path in files
        for target in install_targets(path.read_text())
        if UNPUBLISHED.match(target)
    ]
    assert not bad, "install lines naming an unpublished package:\n" + "\n".join(bad)


def test_install_line_check_sees_the_distribution_name() -> None:
    text = "`pip install 'gitmem-store[mcp]'` or pip install gitmem, not\npip install '.[mcp]' x"
    assert [t for t in install_targets(text) if UNPUBLISHED.match(t)] == [
        "gitmem-store[mcp]",
        "gitmem",
    ]
