"""What the translator keeps on disk: the generated modules under their content hash
(``translations.py``), the key a translation is kept under (``key.py``), Numba's authenticated
cache for generated modules (``numba_cache.py``) and for numba_cube's own helpers
(``helpers.py``).
"""
