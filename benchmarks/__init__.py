"""Measurement scripts (run as `python benchmarks/NAME.py`) and their result JSONs.

Not part of the installed package; `tests/test_benchmarks.py` imports every script so that a
refactor of `nmt` cannot break one silently.
"""
