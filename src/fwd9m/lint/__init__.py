"""Static rules that catch reproducibility pitfalls (filled in by the lint issue)."""
