"""Backend-agnostic policy: what must happen in a launch, in which order, and why.

The contract is ``CONTRACT.md``; the code lives in rooms by concern (each folder's
``__init__.py`` says what its room is for):

| room | what |
| --- | --- |
| ``client/`` | the issuing thread: ``Client``, its buffers and launches, the gates (modes, observers, the launch log, exclusive use, Ctrl-C), the numba-style launch, profiles |
| ``launch/`` | what a launch carries (arguments, composites, geometry, the request) and how it runs (the dispatch and its scope, the host mechanism, the warm paths) |
| ``streams/`` | ordering: stream identity, dependency inference (hazards), host streams and their worker pool, the channel to the server |
| ``ledger/`` | failures on buffers: the ledger and execute scope, failures, pending states, outcomes no buffer carries |
| ``memory/`` | handles and bindings, the memory pool and table, borrowed memory, layouts, array-likeness |
| ``graphs/`` | explicit capture and replay, automatic graphs |

At the top: ``server.py`` (the policy server: one per device, the launch path's steps on the
server side) and ``registry.py`` (the backends and the one server per device).
"""
