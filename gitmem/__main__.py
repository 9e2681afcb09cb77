"""``python -m gitmem`` runs the command-line tool."""

from gitmem.cli import main

main()
