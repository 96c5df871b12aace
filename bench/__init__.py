"""Benchmarks (`make bench`, `python -m bench`): each bench_*.py module has `main()`, measures one
issue item against a baseline of the same run through bench/harness.py, and records figures that
bench/__main__.py writes to results.json and bench/table.py renders for the README."""
