"""A module of the repository that warm_probe.py imports: never pre-imported by the zygote."""

WIDTH = 3
