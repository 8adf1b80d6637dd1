"""Talking to the GPU: the driver's calls and errors (``driver.py``, ``errors.py``), the device's
context (``context.py``), whether the backend can start here (``probe.py``), and the compiled
driver calls of warm launches (``call_ir.py``, ``thunks.py``, ``launch_call.py``); NVTX ranges."""
