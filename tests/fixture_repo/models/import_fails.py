"""A module that raises while being imported."""

raise ImportError("this module cannot be imported on purpose")
