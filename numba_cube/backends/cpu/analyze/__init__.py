"""Analyses of a lowered kernel that passes and emitters read: data flow (uniformity,
liveness, purity: ``dataflow.py``) and the fission plan (which code runs once per cube and which
per unit, between split points: ``analyze/plan.py``).
"""
