"""Demo tasks for `make run` and the benchmarks: no-op, sleep, fail, progress."""
