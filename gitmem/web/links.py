"""The wiki-link graph between sessions (``/links``, raw ``/links.svg``), drawn on the server.

Edges come from :meth:`~gitmem.search.methods.Search.link_graph` (metadata
``links`` and ``[[id]]`` in the text). The picture is an inline SVG with no script and no
library: a force layout whose start is seeded by each id's hash, so the same graph always
looks the same. Edges are arrows from the session that links to the one it names (both
ways: an arrow at each end). A node grows with its session's turns and takes the colour of
its most common tag (``?by=project``: its project), named in a legend. The curated facts
learned from the drawn sessions hang beside them as small squares, a dotted edge to each
source session. Each node links to its session (a fact to its page); a target that is no
session of the store is drawn dashed and links nowhere. ``?focus=ID`` shows that session's
neighbourhood (two hops: a fact counts as one); otherwise the most linked sessions, up to
:data:`MAX_NODES`. ``?zoom=`` and ``?x=``/``?y=`` (the view's centre, in percent) pan and
zoom by plain links, with no script.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import threading
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gitmem.errors import SessionNotFound, ValidationError
from gitmem.format.facts import Fact
from gitmem.manager import MemoryManager
from gitmem.search.browse import LinkGraph, SessionListing
from gitmem.web.pages import int_param, manager, param, render, words

MAX_NODES = 300
MAX_FACTS = 200
HOPS = 2
SIZE = 900.0  # the largest drawing's height (its viewBox); small graphs get less
MARGIN = 40.0
LABEL_ROOM = 180.0  # to the right of the drawing: a label starts right of its node
# the layout's work is about iterations times nodes squared: this many pair steps at most
LAYOUT_BUDGET = 1_500_000
# a colour for each of the most common tags (or projects); the rest share OTHER
PALETTE = ("#2456c7", "#1a7f37", "#c2410c", "#8250df", "#0e7490", "#be185d", "#65730a")
OTHER = "#6e7781"
NONE = "#afb8c1"  # a session with no tag (no project)
FACT = "#9a6700"
MISSING = "#9a6700"
ZOOMS = (1, 2, 4, 8)
GROUPINGS = ("tag", "project")


@dataclass
class Node:
    """A drawn node: a session (``kind`` "session"), a link target that is no session
    ("missing") or a curated fact ("fact", ``label`` its text)."""

    id: str
    x: float
    y: float
    degree: int
    kind: str = "session"
    focus: bool = False
    turns: int = 0
    colour: str = NONE
    group: str | None = None  # the tag (or project) the colour stands for
    text: str = ""

    @property
    def missing(self) -> bool:
        return self.kind == "missing"

    @property
    def label(self) -> str:
        shown = self.text or self.id
        return words(shown, 28) if self.text else (shown if len(shown) <= 28 else shown[:27] + "…")

    @property
    def radius(self) -> int:
        if self.kind != "session":
            return 4
        # by the turns' logarithm: a 100-turn session is not drawn 10 times a 1-turn one
        return 4 + min(14, round(2 * math.log2(1 + self.turns)))


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
class LegendEntry:
    label: str
    colour: str
    count: int


@dataclass
class View:
    """The part of the drawing shown: ``zoom`` times closer, centred at ``x``/``y`` percent
    of its width and height."""

    zoom: int = 1
    x: int = 50
    y: int = 50

    def box(self, width: float, height: float) -> tuple[float, float, float, float]:
        """The SVG viewBox (left, top, width, height) of this view of a drawing."""
        w, h = width / self.zoom, height / self.zoom
        left = min(max(self.x / 100 * width - w / 2, 0.0), width - w)
        top = min(max(self.y / 100 * height - h / 2, 0.0), height - h)
        return left, top, w, h

    def moved(self, *, zoom: int | None = None, dx: int = 0, dy: int = 0) -> View:
        """This view zoomed to ``zoom`` and/or panned by half a view (``dx``/``dy``: -1, 0 or
        1), its centre kept where a view of that zoom can be."""
        new = zoom or self.zoom
        half = 50 // new
        step = 50 // new
        return View(
            new,
            min(max(self.x + dx * step, half), 100 - half),
            min(max(self.y + dy * step, half), 100 - half),
        )


@dataclass
class Drawing:
    """What the SVG template draws."""

    nodes: list[Node] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    facts: list[Node] = field(default_factory=list)
    fact_edges: list[Edge] = field(default_factory=list)  # from a fact to a source session
    legend: list[LegendEntry] = field(default_factory=list)
    size: float = SIZE
    width: float = SIZE + LABEL_ROOM
    dropped: int = 0  # nodes left out by the cap
    total: int = 0  # nodes before the cap
    view: View = field(default_factory=View)

    @property
    def box(self) -> tuple[float, float, float, float]:
        return self.view.box(self.width, self.size)


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


def _ranked(graph: LinkGraph, around: dict[str, set[str]], focus: str | None) -> list[str]:
    """The nodes worth drawing, best first: ``focus`` and what lies within two hops of it
    (nearest first), or every linked session, most linked first."""
    if focus is None:
        return sorted(around, key=lambda n: (-len(around[n]), n))
    wanted = {focus: 0}
    queue = deque([focus])
    while queue:
        node = queue.popleft()
        if wanted[node] < HOPS:
            for other in sorted(around.get(node, ())):
                if other not in wanted:
                    wanted[other] = wanted[node] + 1
                    queue.append(other)
    return sorted(wanted, key=lambda n: (wanted[n], -len(around.get(n, ())), n))


def _colours(
    kept: Iterable[str], listings: dict[str, SessionListing], by: str
) -> tuple[dict[str, tuple[str, str | None]], list[LegendEntry]]:
    """Each session's colour and the group it stands for (its most common tag among the
    drawn ones, or its project), and the legend."""

    def groups(sid: str) -> list[str]:
        found = listings.get(sid)
        if found is None:
            return []
        if by == "project":
            return [found.project] if found.project else []
        return list(found.tags)

    kept = list(kept)
    counts = Counter(g for sid in kept for g in groups(sid))
    # each session stands for its most common group; colours go to the most common of those
    chosen = {
        sid: min(mine, key=lambda g: (-counts[g], g)) if (mine := groups(sid)) else None
        for sid in kept
    }
    shown = Counter(g for g in chosen.values() if g is not None)
    ranked = [g for g, _n in sorted(shown.items(), key=lambda item: (-item[1], item[0]))]
    colour_of = dict(zip(ranked, PALETTE, strict=False))
    out = {sid: (NONE if g is None else colour_of.get(g, OTHER), g) for sid, g in chosen.items()}
    legend = [LegendEntry(g, colour_of[g], shown[g]) for g in ranked if g in colour_of]
    others = sum(n for g, n in shown.items() if g not in colour_of)
    if others:
        legend.append(LegendEntry(f"other {by}s", OTHER, others))
    unlabelled = sum(1 for sid, g in chosen.items() if g is None and sid in listings)
    if unlabelled:
        legend.append(LegendEntry(f"no {by}", NONE, unlabelled))
    return out, legend


def _fact_nodes(
    facts: Iterable[Fact], at: dict[str, Node], near: set[str], size: float
) -> tuple[list[Node], list[Edge]]:
    """The facts learned from the sessions in ``near`` (at most :data:`MAX_FACTS`), each
    placed beside its sources, with an edge to each drawn source."""
    nodes: list[Node] = []
    edges: list[Edge] = []
    for fact in facts:
        sources = sorted({s.session for s in fact.sources if s.session in at})
        if not sources or not near.intersection(sources):
            continue
        if len(nodes) >= MAX_FACTS:
            break
        anchors = [at[s] for s in sources]
        x = sum(n.x for n in anchors) / len(anchors)
        y = sum(n.y for n in anchors) / len(anchors)
        angle = _seed(fact.id)[0] * 2 * math.pi
        gap = max(n.radius for n in anchors) + 16
        x = min(max(x + math.cos(angle) * gap, MARGIN / 2), size - MARGIN / 2)
        y = min(max(y + math.sin(angle) * gap, MARGIN / 2), size - MARGIN / 2)
        node = Node(fact.id, x, y, len(sources), "fact", colour=FACT, text=fact.text)
        nodes.append(node)
        edges.extend(Edge(node, at[s]) for s in sources)
    return nodes, edges


def drawing(
    graph: LinkGraph,
    focus: str | None = None,
    cap: int = MAX_NODES,
    *,
    describe: Callable[[list[str]], dict[str, SessionListing]] | None = None,
    facts: Iterable[Fact] = (),
    by: str = "tag",
    around: dict[str, set[str]] | None = None,
) -> Drawing:
    """The nodes and edges to draw: ``focus`` and what lies within two hops of it, or the
    ``cap`` most linked sessions (ties by id); ``describe`` gives the drawn sessions' turns
    and tags, ``facts`` the curated facts to hang beside their sources; ``around``, each
    node's neighbours, when the caller has them already."""
    around = _neighbours(graph) if around is None else around
    ranked = _ranked(graph, around, focus)
    kept = sorted(ranked[:cap])
    at = {node: i for i, node in enumerate(kept)}
    pairs = sorted(
        {(min(at[a], at[b]), max(at[a], at[b])) for a in kept for b in around.get(a, ()) if b in at}
    )
    spots = layout(tuple(kept), tuple(pairs))
    missing = set(graph.missing)
    sessions = [n for n in kept if n not in missing]
    listings = describe(sessions) if describe and sessions else {}
    colours, legend = _colours(sessions, listings, by)
    # a few nodes in a small picture: two linked sessions are not drawn a page apart
    size = min(SIZE, 2 * MARGIN + 90 * math.sqrt(len(kept)))
    inner = size - 2 * MARGIN
    nodes = []
    for node, (x, y) in zip(kept, spots, strict=True):
        found = listings.get(node)
        colour, group = colours.get(node, (NONE, None))
        nodes.append(
            Node(
                node,
                MARGIN + x * inner,
                MARGIN + y * inner,
                len(around.get(node, ())),
                "missing" if node in missing else "session",
                node == focus,
                found.turns if found else 0,
                MISSING if node in missing else colour,
                group,
            )
        )
    edges = [_edge(graph, nodes[a], nodes[b]) for a, b in pairs]
    by_id = {n.id: n for n in nodes if not n.missing}
    # around a focus, a fact is a hop of its own: only those of the focus and its neighbours
    near = set(by_id) if focus is None else {focus, *around.get(focus, ())}
    fact_nodes, fact_edges = _fact_nodes(facts, by_id, near, size)
    return Drawing(
        nodes,
        edges,
        fact_nodes,
        fact_edges,
        legend,
        size,
        size + LABEL_ROOM,
        max(0, len(ranked) - cap),
        len(ranked),
    )


def _edge(graph: LinkGraph, one: Node, two: Node) -> Edge:
    """The edge between two linked nodes, pointing the way the link goes."""
    forward = two.id in graph.links.get(one.id, ())
    backward = one.id in graph.links.get(two.id, ())
    if backward and not forward:
        return Edge(two, one)
    return Edge(one, two, both=forward and backward)


@dataclass
class Asked:
    """What a links URL asks for: the focus, the grouping of colours and the view."""

    focus: str | None
    by: str
    view: View
    facts: bool

    def link(self, view: View | None = None, **changes: str) -> str:
        """The ``/links`` URL of this request with ``view`` (and other fields) changed."""
        view = view or self.view
        fields = {
            "focus": self.focus or "",
            "by": "" if self.by == "tag" else self.by,
            "facts": "" if self.facts else "0",
            "zoom": "" if view.zoom == 1 else str(view.zoom),
            "x": "" if view.zoom == 1 or view.x == 50 else str(view.x),
            "y": "" if view.zoom == 1 or view.y == 50 else str(view.y),
            **changes,
        }
        query = urlencode([(k, v) for k, v in fields.items() if v])
        return "/links" + ("?" + query if query else "")


def _asked(request: Request) -> Asked:
    by = param(request, "by") or "tag"
    if by not in GROUPINGS:
        raise ValidationError(f"the parameter 'by' must be one of {', '.join(GROUPINGS)}")
    zoom = int_param(request, "zoom", 1, 1, ZOOMS[-1])
    if zoom not in ZOOMS:
        raise ValidationError(f"the parameter 'zoom' must be one of {ZOOMS}, not {zoom}")
    view = View(zoom, int_param(request, "x", 50, 0, 100), int_param(request, "y", 50, 0, 100))
    return Asked(param(request, "focus") or None, by, view.moved(), param(request, "facts") != "0")


class LinkDrawings:
    """The drawings of the links pages, kept per namespace and HEAD: the graph of 10,000
    linked sessions costs a few hundred milliseconds to read and lay out, and nothing in
    it changes until a commit moves HEAD (a save, a pull, a hand commit all do)."""

    KEPT = 32  # drawings (a focus, a colouring) kept for the current HEAD

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._head: tuple[str | None, str | None] = (None, None)
        self._graph: tuple[LinkGraph, dict[str, set[str]]] | None = None
        self._drawings: dict[tuple[str | None, str, bool], Drawing] = {}

    def get(self, mm: MemoryManager, asked: Asked) -> Drawing:
        """The drawing ``asked`` for (its view aside) of ``mm``'s store at HEAD."""
        key = (mm.namespace, mm.head())
        wanted = (asked.focus, asked.by, asked.facts)
        with self._lock:
            if self._head != key:
                self._head, self._graph, self._drawings = key, None, {}
            found = self._drawings.get(wanted)
            graph = self._graph
        if found is not None:
            return found
        if graph is None:
            read = mm.link_graph()
            graph = (read, _neighbours(read))
        picture = drawing(
            graph[0],
            asked.focus,
            MAX_NODES,
            describe=mm.session_listings,
            facts=mm.facts() if asked.facts else (),
            by=asked.by,
            around=graph[1],
        )
        with self._lock:
            if self._head == key:
                self._graph = graph
                if len(self._drawings) >= self.KEPT:
                    self._drawings.clear()
                self._drawings[wanted] = picture
        return picture


def _graph(request: Request) -> tuple[Drawing, Asked]:
    mm = manager(request)
    asked = _asked(request)
    focus = asked.focus
    drawings: LinkDrawings = request.app.state.link_drawings
    picture = drawings.get(mm, asked)
    # a focus that links nowhere is drawn alone: it must at least be a session
    alone = focus is not None and all(n.degree == 0 for n in picture.nodes if n.id == focus)
    if alone and focus is not None and mm.load_memory(focus) is None:
        raise SessionNotFound(f"no session {focus!r}: see the sessions list")
    return dataclasses.replace(picture, view=asked.view), asked


def _views(asked: Asked) -> list[tuple[str, str, str]]:
    """(label, URL, access key) of the pan and zoom links of a view."""
    view = asked.view
    out: list[tuple[str, str, str]] = []
    if view.zoom < ZOOMS[-1]:
        out.append(("Zoom in", asked.link(view.moved(zoom=view.zoom * 2)), "+"))
    if view.zoom > 1:
        out.append(("Zoom out", asked.link(view.moved(zoom=view.zoom // 2)), "-"))
        out.append(("← Left", asked.link(view.moved(dx=-1)), ""))
        out.append(("→ Right", asked.link(view.moved(dx=1)), ""))
        out.append(("↑ Up", asked.link(view.moved(dy=-1)), ""))
        out.append(("↓ Down", asked.link(view.moved(dy=1)), ""))
        out.append(("Whole picture", asked.link(View()), "0"))
    return out


def links_page(request: Request) -> Response:
    picture, asked = _graph(request)
    return render(
        request,
        "links.html",
        {
            "title": "Links",
            "graph": picture,
            "focus": asked.focus,
            "asked": asked,
            "views": _views(asked),
            "cap": MAX_NODES,
            "svg_link": asked.link().replace("/links", "/links.svg", 1),
        },
    )


def links_svg(request: Request) -> Response:
    picture, _asked = _graph(request)
    body = request.app.state.templates.env.get_template("links_graph.svg").render(
        graph=picture, standalone=True
    )
    return Response(body, media_type="image/svg+xml")


ROUTES: list[BaseRoute] = [
    Route("/links", links_page, name="links"),
    Route("/links.svg", links_svg, name="links_svg"),
]
