"""Kernels and device functions without source: a ``def`` rebuilt from Numba's untyped IR
(``function.py`` drives; ``flow.py`` structures the control flow, ``block.py`` spells one basic
block, ``exprs.py`` holds the tables both use).
"""
