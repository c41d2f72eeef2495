"""Runs each configured model through load, export and verification, each in its own worker."""
