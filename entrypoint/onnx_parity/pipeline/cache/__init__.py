"""The result cache: which models need a worker, and what an unchanged model reuses."""
