"""Retrieval: the derived search index, ranking, token counting and context assembly."""
