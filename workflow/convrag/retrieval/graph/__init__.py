"""Graph and tree retrievers (HippoRAG, HippoRAG2, LightRAG, RAPTOR, ToG-2, PoG).

All graph retrievers read one shared knowledge-graph artifact per corpus (``kg.py``: LLM
OpenIE triples, entity and passage nodes, synonym edges, embeddings), built once by its own
rule; RAPTOR builds its own tree. Query-time LLM calls go through the project's Engine (so
they are batched across queries and cached) and are counted per query (``QueryCost``).
"""
