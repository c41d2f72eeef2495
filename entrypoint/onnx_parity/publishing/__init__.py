"""Publishing: the last stage. Only this stage writes outside the run (PR comment, API)."""
