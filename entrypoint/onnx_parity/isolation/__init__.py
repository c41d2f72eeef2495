"""Process isolation: a worker pool of forked children that knows nothing of torch."""
