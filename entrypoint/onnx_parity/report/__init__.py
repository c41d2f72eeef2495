"""Stage 5: render the run's results as JSON, markdown and per-model parity records (pure)."""
