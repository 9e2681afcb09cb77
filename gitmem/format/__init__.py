"""The session file: labels, rendering, the mistune parser, and session ids <-> paths."""
