"""``python -m gitmem`` runs the command-line tool."""

import sys

if sys.argv[1:2] == ["merge-file"]:
    # the merge driver: git starts it once per file, so it skips loading the whole CLI
    from gitmem.sync.driver import run

    run(sys.argv[2:])

from gitmem.cli import main

main()
