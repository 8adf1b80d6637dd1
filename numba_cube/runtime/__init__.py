"""Backend-agnostic policy: what must happen in a launch, in which order, and why.

| module | room |
| --- | --- |
| client.py | the issuing-thread gates and the public client API |
| modes.py | dry runs and real runs (the launch mode) |
| streams.py | stream identity (per thread, pinned, ``with cube.stream()``) |
| hazards.py | dependency inference from read and write sets |
| host_streams.py | per-stream queues and workers for host-executing backends |
| ledger.py | the failure ledger and the execute scope |
| server.py | the server-side launch steps (cache key, compile, scope) |
| memory.py | the memory pool and deferred reuse |
| handle.py | handles (user buffers) and bindings (what crosses the hand-off) |
| channel.py | the device handle: a runner thread, or inline under a lock |
| registry.py | backends, devices, the one server per device |
| observers.py | launch observers |
| eager.py | ``kernel[count, dim](*numpy_arrays)`` |
| geometry.py | ``CubeDim`` and ``CubeCount`` |
"""
