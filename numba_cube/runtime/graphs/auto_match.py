"""The armed launch's check, generated per expected launch: is this launch the one expected next?

An armed automatic graph (``graphs/auto_graph.py``) compares every launch with the next launch of its
sequence. ``auto_graph.launch_key`` builds a launch's full key (a tuple) and would do, but it is a
loop with a type test per argument, which was a third of a deferred launch's cost when measured on
the CPU (``benchmarks/bench_auto_graph.py``). ``expectation`` unrolls that comparison for one
expected key, as ``warm_match.matcher`` unrolls the warm path's: ``kernel is K and count == C and
type(a0) is float and a0 == E0 and ...``. It answers exactly what comparing the two keys would
answer; where that would need more than a few C-level operations (geometry tuples, complex and
NumPy scalars) it compares the keys themselves.

Identity first: a handle never changes its binding or its device (``memory/handle.py``), so the very
handle object that was traced is the expected buffer without asking it anything; an int or an
options key that is the traced object is the traced value. Only a miss compares values (a view
made afresh each iteration is another object with an equal binding, and matches so).
"""

from __future__ import annotations

from numba_cube.runtime.memory.handle import Handle

__all__ = ["expectation"]


def expectation(key: tuple, launch_key, server, traced_args: tuple | None = None):
    """``matches(kernel, count, dim, args, shared_bytes, options) -> bool`` for the launch whose
    key is ``key`` (made by ``launch_key``, which is the fallback) on ``server``. A handle matches
    by its binding's value *and* its device: a binding is plain numbers, which a handle of another
    device could repeat (the client refuses such a handle: it must take the general path).
    ``traced_args``: the arguments the key was made from, if known; a handle among them that is
    of ``server`` and bound as the key says matches by identity before any value is compared."""
    kernel, count, dim, shared_bytes, options = key[:5]
    expected_args = key[5:]
    simple = type(count) is int and type(dim) is int
    names = {"K": kernel, "C": count, "D": dim, "S": shared_bytes, "O": options, "Handle": Handle,
             "KEY": key, "launch_key": launch_key, "SERVER": server}
    tests = []
    for i, e in enumerate(expected_args):
        if type(e) is not tuple:                    # a binding: the handle's
            # the traced handle, or a fresh object nothing else is (no argument matches it)
            names[f"h{i}"] = _traced_handle(traced_args, i, e, server)
            tests.append(f"(a{i} is h{i} or type(a{i}) is Handle and a{i}.binding() == e{i} "
                         f"and a{i}.server is SERVER)")
        elif e[0] in (int, bool):
            tests.append(f"type(a{i}) is t{i} and a{i} == v{i}")
            names[f"t{i}"], names[f"v{i}"] = e
        elif e[0] is float and type(e[1]) is float:  # a non-zero float (a zero keys its repr)
            tests.append(f"type(a{i}) is float and a{i} == v{i}")
            names[f"v{i}"] = e[1]
        else:
            simple = False
        names[f"e{i}"] = e
    n = len(expected_args)
    if not simple:
        src = ("def matches(kernel, count, dim, args, shared_bytes, options):\n"
               "    return launch_key(kernel, count, dim, args, shared_bytes, options) == KEY \\\n"
               "        and all(a.server is SERVER for a in args if type(a) is Handle)\n")
    else:
        unpack = ""
        if n:
            tail = "," if n == 1 else ""
            unpack = f"    {', '.join(f'a{i}' for i in range(n))}{tail} = args\n"
        arity = f"len(args) == {n}"
        # ``x is C`` first: C is an int, so the very object is the very value (True == 1 is why
        # a value comparison also tests the type)
        body = " and ".join(["kernel is K", "(count is C or count == C and type(count) is int)",
                             "(dim is D or dim == D and type(dim) is int)",
                             "(shared_bytes is S or shared_bytes == S and type(shared_bytes) is int)",
                             "(options is O or options == O)"] + tests)
        src = ("def matches(kernel, count, dim, args, shared_bytes, options):\n"
               f"    if not {arity}:\n        return False\n"
               f"{unpack}    return {body}\n")
    namespace = dict(names)
    exec(compile(src, "<numba_cube auto-graph expectation>", "exec"), namespace)
    return namespace["matches"]


def _traced_handle(traced_args: tuple | None, i: int, binding, server):
    """Argument ``i`` of the traced launch when it is a handle of ``server`` bound as ``binding``
    (so that identity implies a match), else a new object no argument can be."""
    if traced_args is not None and len(traced_args) > i:
        handle = traced_args[i]
        if type(handle) is Handle and handle.server is server and handle.binding() is binding:
            return handle
    return object()
