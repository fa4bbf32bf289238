"""Slow, obvious reference twins of the project's kernels (importable as `oracles.*`)."""
