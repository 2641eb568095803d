"""Benchmarks' services, one module per concern (no names here: import a service from its module)."""
