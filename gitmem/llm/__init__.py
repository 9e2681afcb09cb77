"""The client of OpenAI-compatible servers: chat answers, JSON answers and embeddings.

The one package that imports ``openai`` (lazily: it takes ~0.4 s to import).
"""
