"""The translator's front end: a kernel's source read and parsed (or, without source, rebuilt
from its bytecode: ``decompiler/``), its free names resolved, its constants evaluated.

In: a Python function in numba.cuda's dialect. Out: an AST and what its names mean. Nothing
here knows how CUDA builtins are lowered or how code is printed.
"""
