"""A launch on the GPU: what it binds to (``bound_launch.py``), its argument block packed once
(``packed_launch.py``), the warm path that repeats it (``fast_path.py``, ``warm_checks.py``), the
error words of kernels that can raise (``error_slots.py``), dynamic cube counts (``dynamic.py``)."""
