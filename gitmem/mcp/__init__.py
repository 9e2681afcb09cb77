"""``gitmem mcp``: gitmem as the memory of any Model Context Protocol agent.

A thin front end over ``MemoryManager``, beside ``gitmem.cli``: ``sdk`` is the one module
that imports the ``mcp`` package (both of its majors), ``tools`` holds what each tool does
(``paging`` cuts load_session's answers to what a client reads), ``server`` registers the
tools, resources and prompt, ``run`` serves them over stdio or streamable HTTP, ``plugin``
writes the nanobot plugin bundle. Importing ``gitmem.mcp`` needs the ``mcp`` extra
(``pip install '.[mcp]'`` in gitmem's checkout).
"""
