"""Stage 6: the run's results as markdown and JSON, pure functions of the results."""
