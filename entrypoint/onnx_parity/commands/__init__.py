"""The command line's commands, one module each (check, merge, init, action, comment), each
the handler cli.py's table names."""
