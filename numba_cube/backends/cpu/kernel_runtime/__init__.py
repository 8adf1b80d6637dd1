"""Everything the generated modules import at run time: atomics, warp helpers, scans, bounds
checks, float16, bit and math intrinsics, vector types, small support functions.

The digest of this folder's files is part of every generated module's header
(``emit/module.py``: ``SUPPORT_DIGEST``), so editing any of them invalidates the generated
files and Numba's caches. Nothing here imports the translator's stages.
"""
