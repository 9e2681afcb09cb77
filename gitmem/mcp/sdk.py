"""The one place that imports the ``mcp`` SDK: a small shim over its two majors.

mcp 2.x names the server class ``MCPServer`` (``mcp.server.mcpserver``) and takes the HTTP
options when the app is made; 1.x names it ``FastMCP`` (``mcp.server.fastmcp``) and takes them
in the constructor. nanobot pins ``mcp>=1.26,<2``, so gitmem runs on both. Everything else in
``gitmem.mcp`` goes through the names defined here and never sees which major is installed.
Message fields differ too (``client_info`` / ``clientInfo``); models are built from their wire
(camelCase) form, which both majors accept.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from mcp import types
from mcp.types import CallToolResult

from gitmem.errors import GitmemError
from gitmem.version import __version__

try:  # mcp 2.x
    _server_module = importlib.import_module("mcp.server.mcpserver")
    _SERVER_CLASS: Any = _server_module.MCPServer
    MAJOR = 2
except ImportError:  # mcp 1.x
    _server_module = importlib.import_module("mcp.server.fastmcp")
    _SERVER_CLASS = _server_module.FastMCP
    MAJOR = 1

# the class a tool's parameter is annotated with to receive the request context
Context: Any = _server_module.Context
_RESOURCE_ERROR: Any = importlib.import_module(
    f"{_server_module.__name__}.exceptions"
).ResourceError
_SECURITY: Any = importlib.import_module("mcp.server.transport_security").TransportSecuritySettings
_exceptions = importlib.import_module("mcp.shared.exceptions")
# a protocol error passes through a prompt's rendering as it is (2.x hides any other's text)
_PROTOCOL_ERROR: Any = getattr(_exceptions, "MCPError", None) or _exceptions.McpError
# the largest request body the SDK's HTTP transport reads (413 beyond): 4 MiB in both majors
MAX_REQUEST_BYTES: int = (
    getattr(
        importlib.import_module("mcp.server.transport_security"),
        "DEFAULT_MAX_REQUEST_BODY_SIZE",
        None,
    )
    or importlib.import_module("mcp.server.streamable_http").MAXIMUM_MESSAGE_SIZE
)
# the name the Python SDK's client sends when its user gave none: not an agent's name
SDK_DEFAULT_CLIENT = "mcp"

__all__ = ["MAJOR", "CallToolResult", "Context", "HttpOptions", "McpUnavailable"]


class McpUnavailable(GitmemError):
    """The ``mcp`` package is missing or too old for ``gitmem mcp``."""


@dataclass
class HttpOptions:
    """How the streamable HTTP transport listens (ignored over stdio)."""

    host: str = "127.0.0.1"
    port: int = 8000
    path: str = "/mcp"
    # Host header values accepted (DNS rebinding protection); empty: the SDK's loopback set
    hosts: list[str] = field(default_factory=list)
    origins: list[str] = field(default_factory=list)
    stateless: bool = False

    def security(self) -> Any:
        if not self.hosts:
            return None
        return _SECURITY(
            enable_dns_rebinding_protection=True,
            allowed_hosts=self.hosts,
            allowed_origins=self.origins,
        )


def new_server(name: str, instructions: str, http: HttpOptions | None = None) -> Any:
    """A server object of the installed major (``MCPServer`` or ``FastMCP``)."""
    if MAJOR == 2:
        return _SERVER_CLASS(
            name=name, instructions=instructions, version=__version__, log_level="WARNING"
        )
    options: dict[str, Any] = {}
    if http is not None:
        options = {
            "host": http.host,
            "port": http.port,
            "streamable_http_path": http.path,
            "stateless_http": http.stateless,
            "transport_security": http.security(),
        }
    server = _SERVER_CLASS(name=name, instructions=instructions, log_level="WARNING", **options)
    server._mcp_server.version = __version__  # 1.x takes no version: serverInfo reads this one
    return server


def add_tool(
    server: Any,
    fn: Callable[..., Any],
    *,
    name: str,
    title: str,
    description: str,
    read_only: bool,
    destructive: bool = False,
) -> None:
    """Register ``fn`` as the tool ``name`` (its parameters give the input schema)."""
    hints = types.ToolAnnotations.model_validate(
        {
            "title": title,
            "readOnlyHint": read_only,
            "destructiveHint": destructive,
            "idempotentHint": read_only,
            "openWorldHint": False,
        }
    )
    server.add_tool(fn, name=name, title=title, description=description, annotations=hints)


def add_resource(
    server: Any, fn: Callable[..., Any], uri: str, *, name: str, mime_type: str, description: str
) -> None:
    """Register ``fn`` as the resource (or template, when ``uri`` has ``{...}``) ``uri``."""
    server.resource(uri, name=name, mime_type=mime_type, description=description)(fn)


def add_prompt(
    server: Any, fn: Callable[..., Any], *, name: str, title: str, description: str
) -> None:
    """Register ``fn`` as the prompt ``name`` (its parameters are the prompt's arguments)."""
    server.prompt(name=name, title=title, description=description)(fn)


def tool_result(text: str, data: dict[str, Any], *, error: bool = False) -> CallToolResult:
    """A tool's answer: a short text for the model and the same facts as structured content."""
    return CallToolResult.model_validate(
        {
            "content": [{"type": "text", "text": text}],
            "structuredContent": data,
            "isError": error,
        }
    )


def client_name(ctx: Any) -> str | None:
    """The name the client gave in ``initialize`` (its ``clientInfo``), or None."""
    try:
        params = ctx.session.client_params
    except (AttributeError, LookupError, ValueError):
        return None
    info = getattr(params, "client_info", None) or getattr(params, "clientInfo", None)
    name = getattr(info, "name", None)
    if not isinstance(name, str) or not name.strip() or name == SDK_DEFAULT_CLIENT:
        return None
    return name


def resource_error(message: str) -> Exception:
    """The exception a resource handler raises so the client gets ``message`` as the error."""
    error: Exception = _RESOURCE_ERROR(message)
    return error


def prompt_error(message: str) -> Exception:
    """The exception a prompt raises so the client gets ``message`` (invalid params)."""
    if MAJOR == 2:
        error: Exception = _PROTOCOL_ERROR(types.INVALID_PARAMS, message)
    else:  # 1.x's McpError takes the error data; its prompt errors carry the text anyway
        error = _PROTOCOL_ERROR(types.ErrorData(code=types.INVALID_PARAMS, message=message))
    return error


def uri_value(value: str) -> str:
    """A resource template's parameter as the handler should see it: 2.x has already
    percent-decoded it, 1.x hands over the raw URI text."""
    return value if MAJOR == 2 else unquote(value)


def http_app(server: Any, http: HttpOptions) -> Any:
    """The ASGI app of the streamable HTTP transport (its lifespan runs the sessions)."""
    if MAJOR == 2:
        return server.streamable_http_app(
            streamable_http_path=http.path,
            stateless_http=http.stateless,
            host=http.host,
            transport_security=http.security(),
        )
    return server.streamable_http_app()


def run_stdio(server: Any) -> None:
    """Serve over stdin/stdout until the client closes them."""
    server.run("stdio")
