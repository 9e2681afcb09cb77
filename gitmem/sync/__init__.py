"""Sharing a store: remotes, semantic merge, the merge driver and git hooks."""
