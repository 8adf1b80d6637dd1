"""Pluggy hook specifications: how backends and observers plug into numba_cube.

A plugin is a module or object with functions marked ``@numba_cube.hookimpl``, registered through
the entry-point group ``numba_cube`` (see the example packages under ``plugins/`` and the guide
for plugin authors beside them, ``plugins/README.md``)::

    # pyproject.toml of a plugin package
    [project.entry-points.numba_cube]
    mybackend = "my_package.plugin"

    # my_package/plugin.py
    import numba_cube

    @numba_cube.hookimpl
    def numba_cube_register_backends(register):
        register("mybackend", factory, api_version=numba_cube.BACKEND_API_VERSION)

The hooks:

- ``numba_cube_register_backends(register)``: backends (the built-in ones register here too);
- ``numba_cube_launch(event)``: each launch, on the issuing thread;
- ``numba_cube_task_done(event)``: each dispatch, when it finished, with timing and inferred
  dependencies (what a timeline tracer needs);
- ``numba_cube_client_created(client)``: each new client.

Plugins load lazily, on the first use of backends or clients (``plugins.get_plugin_manager``);
``NUMBA_CUBE_DISABLE_PLUGIN_AUTOLOAD=1`` skips entry points. A plugin can also be registered at
run time, ``numba_cube.plugins.get_plugin_manager().register(obj)`` (its backends and observers
take effect at once) and removed with ``unregister(obj)``: that is how tests register one.
``numba_cube_register_backends`` and ``numba_cube_client_created`` are called through pluggy, so
``tryfirst``/``trylast`` and hook wrappers apply (the built-in backends register ``tryfirst``).
The observer hooks are called without pluggy's machinery on the hot path, one implementation
after another in pluggy's order, each isolated: an exception is logged and the others still
run. Hook wrappers are not supported for them.
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
    priority=0, devices=None, default_options=None)`` once per backend.

    - ``name``: an identifier; devices are ``<name>:0``, ``<name>:1``, ... A name another plugin
      already registered is refused (recorded in ``numba_cube.plugins.plugin_errors()``).
    - ``factory(index) -> server`` builds the server of device ``<name>:<index>``; it is called at
      most once per device, the first time a client of it is asked for. An exception it raises
      becomes a ``BackendNotFound`` naming the device and the cause.
    - ``api_version`` must be ``numba_cube.BACKEND_API_VERSION``: a backend built for another
      version (or that declares none) is refused with a message naming both versions, and stays
      listed as unavailable with that message.
    - ``available() -> str | None`` says why the backend cannot start (no driver, no device, a
      missing package), or ``None`` when it can. It must be cheap and must not import heavy
      modules; an exception it raises counts as "unavailable" with the exception as the reason.
      An unavailable backend is listed by ``cube.backends()`` and ``python -m numba_cube info``,
      and ``cube.client(name)`` raises ``BackendNotFound`` with the reason.
    - ``priority`` orders backends when ``cube.client()`` picks a default (highest available
      wins; ``cpu`` has 0, debug backends should use a negative value).
    - ``devices() -> list[str]``: a cheap probe of the device names, for ``info``; without it
      ``<name>:0`` is listed.
    - ``default_options() -> dict``: client options the environment sets, read each time
      ``cube.client(name, **options)`` is asked; an option the caller passes wins. The ``cpu``
      backend's is ``boundscheck`` from ``NUMBA_BOUNDSCHECK`` / ``NUMBA_CUBE_BOUNDSCHECK``.

    Called once per plugin, through pluggy (each call is this plugin's only, so ``register``
    knows who registers, and a plugin that raises is recorded in ``plugin_errors()`` without
    keeping the others' backends out), when the plugin manager starts (first use of backends or
    clients), or when a plugin is registered later with ``get_plugin_manager().register(plugin)``.
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
    """A client was created: ``cube.client(device, **options)`` was asked for a device and
    options it had not seen before (asking again returns the same client and calls nothing).

    Called on the thread that asked, after the client exists and outside the registry's lock, so
    the hook may use the client or ask for others. An exception is logged and ignored (the client
    stays created); as in any pluggy call it ends the call, so implementations pluggy would call
    after it are skipped.
    """
