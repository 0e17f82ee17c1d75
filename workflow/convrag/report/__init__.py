"""Report outputs: tables (CSV + Markdown) and figures (PNG + PDF)."""
