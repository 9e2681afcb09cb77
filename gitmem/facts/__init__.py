"""Curated long-term memory: facts with provenance in ``memory/MEMORY.md``."""
