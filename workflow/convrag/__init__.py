"""ConvRAG-Grid: reproducible experiment grids for conversational RAG studies."""

__version__ = "0.1.0"
