"""The web dashboard (``gitmem web``): browse, search, history, diff, blame and undo in a
browser.

A thin layer over :class:`~gitmem.manager.MemoryManager`: Starlette routes, one module per
page group, Jinja2 templates and one stylesheet shipped in the package (no CDN, no
script: the machine may be offline, and the Content-Security-Policy runs none). Every
state-changing request is a CSRF-checked POST; writes are commits with ``Gitmem-Via: web``.
Needs the ``web`` extra: ``pip install '.[web]'`` in gitmem's checkout.
"""

from __future__ import annotations

from gitmem.web.app import WebOptions, create_app

__all__ = ["WebOptions", "create_app"]
