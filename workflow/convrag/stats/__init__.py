"""Statistics: bootstrap confidence intervals for per-question scores."""
