"""Graphs (CONTRACT.md section 6): explicit capture and replay, and automatic graphs (a repeating
sequence of launches replayed as one graph: ``graphs/auto_graph.py``, its server-side channel and its
per-launch match).
"""
