"""The reference kernels' benchmark suite: ``python -m bench`` on a GPU (see bench/run.py)."""
