"""Benchmarks for zett: runtime overhead against peer frameworks, and the socket path.

Run them as modules from the repository root (``python -m bench.runtime``,
``python -m bench.socket``) with the benchmark virtualenv described in ``bench/README.md``.
"""
