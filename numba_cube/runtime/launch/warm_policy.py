"""The warm-launch policy, stated once: when a launch is armed, when an armed one fires.

Two warm paths implement it, each with its own mechanism: ``launch/warm_host.py`` (host
backends: a repeated launch runs or queues without the general path's layers) and
``backends/cuda/launch/fast_path.py`` (CUDA: one match and one driver call). Both apply this policy;
the functions below are the part they share as code, and ``tests/runtime/launch/
test_warm_policy.py`` runs the same programs through both and checks they agree.

**Arming** (after a general launch that ran): a launch is armed when it can be matched cheaply
and exactly (``armable_match``):

- it was made as the caller wrote it (``req.as_called``: a numba-style launch on host arrays
  copies, it is never armed) with plain geometry (ints or tuples of ints, ``PLAIN_GEOMETRY``);
- its arguments are handles and plain numbers (``warm_match.match_of``): a tuple, a record, a
  foreign array takes the general path every time;
- the hazard tracker keeps its default rule (``baseline`` switched off: the rule for
  comparisons, which only the general path implements);
- and what a backend adds: the host refuses composites, dynamic counts and dynamic shared
  memory, converts declared scalars per launch; CUDA refuses foreign buffers, declared
  signatures and ``debug=True`` kernels (they read their exception flag back per launch).

Entries are kept newest first, a few per key (``remember``): a loop often launches one kernel
with two or more argument sets (ping-pong buffers); an entry for the same launch replaces the
old one; the table is bounded (a program generating kernels forever).

**Firing** (the client's ``fast_launch``, on the issuing thread): an armed launch fires when the
kernel, geometry, options, stream, handles (by binding) and scalar types match; then, under the
device lock, anything that changed since arming sends it to the general path, which is always
correct, before anything was done:

1. a capture window open on the device (its launches are recorded, not run);
2. a *settled* failure in the ledger on one of its regions (the general path skips the launch
   and passes the root on). A claim in flight or a pending state is not settled: the warm
   launch queues behind that work and inherits what it leaves, as the general path would;
3. (CUDA) its CUDA stream recycled for another stream id.

Dependencies as the general path's: when every buffer's live entries are this stream's
(``HazardTracker.register_solo``) there is nothing to wait for; otherwise the full walk, and the
launch waits for what it names (queued after it on the host, an event wait on the device). The
client sends no launch down a warm path while observers, profiles, dry runs or exclusive use are
active (``client/watchers.py``).
"""

from __future__ import annotations

from numba_cube.runtime.launch.warm_match import PLAIN_GEOMETRY, match_of

__all__ = ["armable_match", "remember", "MAX_ARMED_KEYS"]

#: The most keys (kernels, or kernel and stream) a warm path keeps entries for; past it the table
#: is cleared (a program that generates kernels forever must not grow it without bound).
MAX_ARMED_KEYS = 1024


def armable_match(req, hazards):
    """``(kernel, count, dim, match)`` for a launch the policy lets a warm path arm, or None:
    made as called, plain geometry, handles and plain numbers only, the default dependency rule
    (the module docstring). A backend's own refusals come on top."""
    called = req.as_called
    if called is None or hazards.baseline:
        return None
    kernel, count, dim, raw_args = called
    if type(count) not in PLAIN_GEOMETRY or type(dim) not in PLAIN_GEOMETRY:
        return None
    match = match_of(raw_args)
    if match is None:
        return None
    return kernel, count, dim, match


def remember(table: dict, key, entry, identity, per_key: int) -> None:
    """Keep ``entry`` first among ``table[key]``'s armed launches: an entry with the same
    ``identity(entry)`` (the same launch, re-armed after a general launch) is replaced, at most
    ``per_key`` are kept, and the whole table is cleared past ``MAX_ARMED_KEYS`` keys."""
    if len(table) >= MAX_ARMED_KEYS:
        table.clear()
    same = identity(entry)
    older = [e for e in table.get(key, ()) if identity(e) != same]
    table[key] = [entry] + older[:per_key - 1]
