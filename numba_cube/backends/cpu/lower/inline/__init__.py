"""Inlining device functions into their caller, the way numba-cuda types them: ``inliner.py``
decides and drives, ``bind.py`` binds parameters, ``body.py`` rewrites the inlined body,
``hooks.py`` is what the lowering traversal offers it, ``nested.py`` handles closures.
"""
