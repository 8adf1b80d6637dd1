"""Backend-agnostic policy: what must happen in a launch, in which order, and why.

| module | room |
| --- | --- |
| client.py | the public client: `with client:`, pinned streams, capture, auto-graph, profile and exclusive scopes |
| client_launch.py | the client's launches: the issuing-thread gates, the warm path, the submission |
| client_buffers.py | the client's buffers: allocate, write, read, check, synchronize |
| arguments.py | how launch arguments travel: handles as bindings, scalars typed as numba.cuda types them |
| requests.py | the launch request (issuing thread -> server) and the launch-limit refusal |
| modes.py | dry runs and real runs (the launch mode) |
| streams.py | stream identity (per thread, pinned, ``with cube.stream()``) |
| hazards.py | dependency inference from read and write sets |
| host_streams.py | per-stream queues of host-executing backends, their tasks |
| stream_pool.py | the bounded pool of worker threads that runs host streams |
| ledger.py | the failure ledger and the execute scope |
| server.py | the server-side launch steps (cache key, compile, scope) |
| interrupts.py | Ctrl-C during a compile, taken when the compile ends |
| outcomes.py | failures no buffer carries: a waiting caller's outcome, unrecorded-failure warnings |
| exclusive.py | exclusive use of a device by one thread |
| memory.py | the memory pool and deferred reuse |
| memory_table.py | the server's memory table: allocation, frees, host views |
| handle.py | handles (user buffers) and bindings (what crosses the hand-off) |
| channel.py | the device handle: a runner thread, or inline under a lock |
| registry.py | backends (with the plugin that registered each), devices, the one server per device |
| launch_log.py | the issuing thread's log of the kernel ids it launched |
| observers.py | launch observers |
| eager.py | ``kernel[count, dim](*numpy_arrays)`` |
| geometry.py | ``CubeDim`` and ``CubeCount`` |
"""
