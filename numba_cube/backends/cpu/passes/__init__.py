"""Passes: each decides one thing about a kernel (a check to add, a loop to reorder, a region
to run in lockstep, an idiom to replace) from the lowered body and the analyses.

A pass never prints the module; the emitters (``emit/``) read its decisions. (Four passes still
use the emitters' ``Writer`` to print their own pieces and two read affine helpers from
``emit/flat_kernel.py``: ``tests/test_layering.py`` lists those edges, which are to go.)
"""
