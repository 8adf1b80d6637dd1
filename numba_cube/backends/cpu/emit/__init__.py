"""Emitters: print the generated module from the lowered kernel, the plan and the passes'
decisions. ``module.py`` assembles it; ``flat_kernel.py`` prints a barrier-free kernel as one
flat loop, ``cube_kernel.py`` a kernel with barriers as loops over cubes and units (its regions:
``regions.py``, ``unit_loops.py``, ``lower/warps.py``); ``block_shape.py`` specializes a module for
one block shape; ``emit/linemarks.py`` keeps the user's lines on generated statements.
"""
