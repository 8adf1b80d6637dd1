"""Warp-synchronous memory exchange: ``schedule.py`` decides where units must run a region
statement by statement; ``index.py`` is its index algebra, ``segments.py`` cuts regions into
steps.
"""
