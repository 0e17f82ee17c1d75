"""Evaluation metrics (answer quality, retrieval)."""
