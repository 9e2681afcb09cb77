"""The one version string: pyproject.toml, `gitmem --version` and the MCP serverInfo read it."""

__version__ = "0.1.0"
