"""Benchmarks (`make bench`): each bench_*.py module has `main(out_dir)` and prints its numbers."""
