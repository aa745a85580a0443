"""The saturation benchmark suite: catch-up of a binlog backlog and live load, per interpreter.

Run ``python -m bench.suite --help``; results go to ``bench/results.jsonl``, one line per
(interpreter, shape) and run, and ``python -m bench.compare A B`` compares two commits.
See docs/benchmarks.md for what each number means.
"""
