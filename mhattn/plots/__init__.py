"""Figures built on matplotlib.figure.Figure, no global state: each draws what it is handed (arrays, a report's
data) and computes nothing of its own, so plots imports nothing above :mod:`mhattn.functional`.

Used by :mod:`mhattn.heads.jobs` (``mhattn prune``'s figures), :mod:`mhattn.course.display`, the
``walkthrough`` command and the notebooks.
"""
