"""Stage 5: the run's results as markdown and JSON, pure functions of the results."""
