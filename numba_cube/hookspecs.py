"""Pluggy hook specifications: how backends and observers plug into numba_cube.

A plugin is a module or object with functions marked ``@numba_cube.hookimpl``, registered through
the entry-point group ``numba_cube`` (see the example packages under ``plugins/``)::

    # pyproject.toml of a plugin package
    [project.entry-points.numba_cube]
    mybackend = "my_package.plugin"

    # my_package/plugin.py
    import numba_cube

    @numba_cube.hookimpl
    def numba_cube_register_backends(register):
        register("mybackend", factory, api_version=numba_cube.BACKEND_API_VERSION)

The built-in backends register through the same hook.
"""

from __future__ import annotations

import pluggy

__all__ = ["hookspec", "hookimpl", "PROJECT_NAME"]

PROJECT_NAME = "numba_cube"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def numba_cube_register_backends(register):
    """Register backends by calling ``register(name, factory, *, api_version, available=None,
    priority=0)``.

    ``factory(index) -> server`` builds the server of device ``<name>:<index>``; it is called at
    most once per device, the first time a client of it is asked for. ``api_version`` must be
    ``numba_cube.BACKEND_API_VERSION``: a backend built for another version is refused with a
    message naming both. ``available() -> str | None`` says why the backend cannot start (no
    driver, no device), or ``None`` when it can; it must not raise and must be cheap.
    ``priority`` orders backends when ``cube.client()`` picks a default (highest available wins).
    """


@hookspec
def numba_cube_launch(event):
    """Observe a launch on the issuing thread, before the hand-off to the server.

    ``event`` is a ``numba_cube.LaunchEvent`` (device, kernel id and name, count, dim, args,
    stream, launch mode, thread name). Keep it fast: it runs on every launch. An exception is
    logged and ignored.
    """


@hookspec
def numba_cube_task_done(event):
    """A dispatch finished, on the thread that ran it (a stream worker on host backends).

    ``event`` is a ``numba_cube.TaskEvent``: device, task id, kernel id, stream, the ids of the
    tasks on other streams it waited for (its inferred dependencies), start and end
    (``time.perf_counter()``; ``None`` when it did not run) and whether its outputs failed. This is
    what a timeline tracer needs. Keep it fast; an exception is logged and ignored.
    """


@hookspec
def numba_cube_client_created(client):
    """A client of a device was created (first use of that device and those options)."""
