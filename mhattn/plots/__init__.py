"""Figures built with matplotlib.figure.Figure, no global state (used by heads, course, commands and the notebooks)."""
