"""The command line's commands: what `check`, `merge` and `init` do with the stages."""
