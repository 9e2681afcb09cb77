"""The wiki-link graph between sessions (``/links``, raw ``/links.svg``), drawn on the server.

Edges come from :meth:`~gitmem.search.methods.Search.link_graph` (metadata
``links`` and ``[[id]]`` in the text). The picture is an inline SVG with no script and no
library: a force layout whose start is seeded by each id's hash, so the same graph always
looks the same. Edges are arrows from the session that links to the one it names (both
ways: an arrow at each end); a node grows with its links. Each node links to its session;
a target that is no session of the store is drawn dashed and links nowhere. ``?session=ID``
shows that session's neighbourhood (two hops); otherwise the most linked sessions, up to
:data:`MAX_NODES`.
"""

from __future__ import annotations

import hashlib
import math
from collections import deque
from dataclasses import dataclass, field
from functools import lru_cache

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gitmem.errors import SessionNotFound
from gitmem.search.browse import LinkGraph
from gitmem.web.pages import manager, param, render

MAX_NODES = 300
HOPS = 2
SIZE = 900.0  # the largest drawing's height (its viewBox); small graphs get less
MARGIN = 40.0
LABEL_ROOM = 180.0  # to the right of the drawing: a label starts right of its node
# the layout's work is about iterations times nodes squared: this many pair steps at most
LAYOUT_BUDGET = 1_500_000


@dataclass
class Node:
    id: str
    x: float
    y: float
    degree: int
    missing: bool
    focus: bool = False

    @property
    def label(self) -> str:
        return self.id if len(self.id) <= 28 else self.id[:27] + "…"

    @property
    def radius(self) -> int:
        return 4 + min(self.degree, 8)


@dataclass
class Edge:
    """A link drawn from ``source`` to ``target``; ``both`` when each links the other. Its
    ends stop at the circles' rims, so an arrowhead is not hidden under a node."""

    source: Node
    target: Node
    both: bool = False

    def _end(self, at: Node, other: Node) -> tuple[float, float]:
        dx, dy = other.x - at.x, other.y - at.y
        d = math.hypot(dx, dy) or 1.0
        gap = at.radius + 1.5
        return at.x + dx / d * gap, at.y + dy / d * gap

    @property
    def start(self) -> tuple[float, float]:
        return self._end(self.source, self.target)

    @property
    def end(self) -> tuple[float, float]:
        return self._end(self.target, self.source)


@dataclass
class Drawing:
    """What the SVG template draws."""

    nodes: list[Node] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    size: float = SIZE
    width: float = SIZE + LABEL_ROOM
    dropped: int = 0  # nodes left out by the cap
    total: int = 0  # nodes before the cap


def _seed(node: str) -> tuple[float, float]:
    digest = hashlib.blake2b(node.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return (int.from_bytes(digest[:4], "big") / 2**32, int.from_bytes(digest[4:], "big") / 2**32)


@lru_cache(maxsize=32)
def layout(
    nodes: tuple[str, ...], edges: tuple[tuple[int, int], ...]
) -> tuple[tuple[float, float], ...]:
    """Positions in [0, 1] for ``nodes`` (Fruchterman-Reingold with a pull to the centre,
    so that parts not linked to each other stay in the picture). Deterministic: the start
    comes from each id's hash, and the same input gives the same output."""
    n = len(nodes)
    if n == 0:
        return ()
    if n == 1:
        return ((0.5, 0.5),)
    pos = [list(_seed(node)) for node in nodes]
    k = math.sqrt(1.0 / n)
    steps = max(25, min(300, LAYOUT_BUDGET // (n * n)))
    temperature = 0.1
    for step in range(steps):
        moves = [[0.0, 0.0] for _ in range(n)]
        for i in range(n):
            xi, yi = pos[i]
            mi = moves[i]
            for j in range(i + 1, n):
                dx, dy = xi - pos[j][0], yi - pos[j][1]
                d2 = dx * dx + dy * dy or 1e-9
                f = k * k / d2  # repulsion / distance
                mi[0] += dx * f
                mi[1] += dy * f
                moves[j][0] -= dx * f
                moves[j][1] -= dy * f
        for a, b in edges:
            dx, dy = pos[a][0] - pos[b][0], pos[a][1] - pos[b][1]
            d = math.sqrt(dx * dx + dy * dy) or 1e-9
            f = d / k  # attraction / distance
            moves[a][0] -= dx * f
            moves[a][1] -= dy * f
            moves[b][0] += dx * f
            moves[b][1] += dy * f
        for i in range(n):
            mx = moves[i][0] + (0.5 - pos[i][0]) * 2 * k
            my = moves[i][1] + (0.5 - pos[i][1]) * 2 * k
            d = math.sqrt(mx * mx + my * my) or 1e-9
            step_len = min(d, temperature)
            pos[i][0] += mx / d * step_len
            pos[i][1] += my / d * step_len
        temperature = 0.1 * (1 - (step + 1) / steps) + 0.002
    # one scale for both axes (a graph keeps its shape), centred in [0, 1]
    xs, ys = [p[0] for p in pos], [p[1] for p in pos]
    span = max(max(xs) - min(xs), max(ys) - min(ys)) or 1.0
    cx, cy = (max(xs) + min(xs)) / 2, (max(ys) + min(ys)) / 2
    return tuple((0.5 + (p[0] - cx) / span, 0.5 + (p[1] - cy) / span) for p in pos)


def _neighbours(graph: LinkGraph) -> dict[str, set[str]]:
    around: dict[str, set[str]] = {}
    for source, targets in graph.links.items():
        for target in targets:
            around.setdefault(source, set()).add(target)
            around.setdefault(target, set()).add(source)
    return around


def drawing(graph: LinkGraph, focus: str | None = None, cap: int = MAX_NODES) -> Drawing:
    """The nodes and edges to draw: ``focus`` and what lies within two hops of it, or the
    ``cap`` most linked sessions (ties by id)."""
    around = _neighbours(graph)
    if focus is not None:
        wanted = {focus: 0}
        queue = deque([focus])
        while queue:
            node = queue.popleft()
            if wanted[node] < HOPS:
                for other in sorted(around.get(node, ())):
                    if other not in wanted:
                        wanted[other] = wanted[node] + 1
                        queue.append(other)
        ranked = sorted(wanted, key=lambda n: (wanted[n], -len(around.get(n, ())), n))
    else:
        ranked = sorted(around, key=lambda n: (-len(around[n]), n))
    kept = sorted(ranked[:cap])
    at = {node: i for i, node in enumerate(kept)}
    pairs = sorted(
        {(min(at[a], at[b]), max(at[a], at[b])) for a in kept for b in around.get(a, ()) if b in at}
    )
    spots = layout(tuple(kept), tuple(pairs))
    missing = set(graph.missing)
    # a few nodes in a small picture: two linked sessions are not drawn a page apart
    size = min(SIZE, 2 * MARGIN + 90 * math.sqrt(len(kept)))
    inner = size - 2 * MARGIN
    nodes = [
        Node(
            node,
            MARGIN + x * inner,
            MARGIN + y * inner,
            len(around.get(node, ())),
            node in missing,
            node == focus,
        )
        for node, (x, y) in zip(kept, spots, strict=True)
    ]
    edges = [_edge(graph, nodes[a], nodes[b]) for a, b in pairs]
    return Drawing(nodes, edges, size, size + LABEL_ROOM, max(0, len(ranked) - cap), len(ranked))


def _edge(graph: LinkGraph, one: Node, two: Node) -> Edge:
    """The edge between two linked nodes, pointing the way the link goes."""
    forward = two.id in graph.links.get(one.id, ())
    backward = one.id in graph.links.get(two.id, ())
    if backward and not forward:
        return Edge(two, one)
    return Edge(one, two, both=forward and backward)


def _graph(request: Request) -> tuple[Drawing, str | None]:
    mm = manager(request)
    focus = param(request, "session") or None
    graph = mm.link_graph()
    linked = focus is None or focus in graph.links or focus in graph.missing
    if not linked and focus is not None and mm.load_memory(focus) is None:
        raise SessionNotFound(f"no session {focus!r}: see the sessions list")
    return drawing(graph, focus, MAX_NODES), focus


def links_page(request: Request) -> Response:
    picture, focus = _graph(request)
    return render(
        request,
        "links.html",
        {"title": "Links", "graph": picture, "focus": focus, "cap": MAX_NODES},
    )


def links_svg(request: Request) -> Response:
    picture, _focus = _graph(request)
    body = request.app.state.templates.env.get_template("links_graph.svg").render(
        graph=picture, standalone=True
    )
    return Response(body, media_type="image/svg+xml")


ROUTES: list[BaseRoute] = [
    Route("/links", links_page, name="links"),
    Route("/links.svg", links_svg, name="links_svg"),
]
