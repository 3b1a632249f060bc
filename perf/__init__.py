"""Benchmarks: each module runs as ``python -m cesar.perf.<name>`` and has a ``--smoke`` mode."""
