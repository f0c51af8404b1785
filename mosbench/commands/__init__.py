"""The commands that live beside cli.py, one module each, and the options they share with it (options.py)."""
