"""numba.cuda kernels made GPU code: compiled by numba-cuda for one signature (``compiler.py``,
``entries.py``), with their exceptions recorded without ``debug=True`` (``exception_codegen.py``,
``exceptions.py``), kept on disk across processes (``diskcache.py``)."""
