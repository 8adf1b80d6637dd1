"""Lowering: numba.cuda builtins become plain Python over the translator's hidden names
(``lower/lowering.py`` walks the body, ``cuda_calls.py`` knows numba.cuda's API, ``lower/warps.py``
the warp intrinsics), and device functions that need it are inlined (``inline/``).

In: the front end's AST. Out: a lowered body that the analyses and passes read.
"""
