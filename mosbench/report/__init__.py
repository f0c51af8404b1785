"""Presenting stored runs: terminal tables (table.py), the paper's figures (plots.py), the HTML report (html.py)."""
