"""Backends: the mechanism under the runtime's policy (see ``base.py``).

Each backend package is also a pluggy plugin: it registers itself through the
``numba_cube_register_backends`` hook, exactly as a third-party backend does.
"""
