"""Bounds checks whose ``IndexError`` says where: ``checks.py`` adds them, ``affine.py`` gives the
affine forms of indices they are proven with, ``coverage.py`` says which subscripts are covered
and which generated functions may run unchecked. Their run-time half is
``kernel_runtime/bounds.py``.
"""
