"""The issuing thread's side of the runtime: the ``Client`` and its buffer and launch
operations, the gates a launch passes on the issuing thread (modes, observers, the launch log,
exclusive use, Ctrl-C during a compile), the numba-style launch (``client/eager.py``) and profiles.
"""
