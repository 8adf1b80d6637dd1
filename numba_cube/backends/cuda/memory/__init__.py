"""Device memory and what crosses into it: allocations and pinned staging (``memory.py``), host
copies (``copies.py``), other libraries' arrays as arguments and ours as theirs (``interop.py``,
``foreign_array.py``, DLPack: ``dlpack.py``, ``dlpack_export.py``)."""
