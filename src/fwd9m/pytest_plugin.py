"""pytest plugin (entry point ``pytest11``): fixtures and markers for reproducibility
tests. Imports no framework."""
