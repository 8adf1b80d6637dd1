"""The CUDA executor: stream work ordered by events (``executor.py``, ``stream_state.py``), the
tasks the policy server sees (``tasks.py``), CUDA graphs from captures (``graphs.py``)."""
