"""Benchmarks: each module runs as ``python -m perf.<name>`` and has a ``--smoke`` mode."""
