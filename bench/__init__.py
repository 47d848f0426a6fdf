"""Benchmarks: each bench_*.py module has run() -> list[dict] and prints a table as main."""
