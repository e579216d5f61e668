"""Reproducible speed figures for blazen, side by side with the libraries users would pick.

Run everything with ``python -m benchmarks`` (see ``benchmarks/README.md``).
"""
