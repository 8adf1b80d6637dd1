"""The public API (api.md) is what ``import numba_cube as cube`` exports, and ``__all__`` is
honest: every name in it exists, every name api.md promises is in it, every other public
module-level name is a submodule, and the error tree has the documented shape."""

from __future__ import annotations

import __future__
import logging
import re
import types
from pathlib import Path

import pytest

import numba_cube as cube

# The design notes live next to the checkout (``../shared/design``) where they are present.
API_MD = Path(__file__).resolve().parents[2] / "shared" / "design" / "api.md"

# The names api.md promises at top level (section by section).
PROMISED = {
    "kernel", "CubeDim", "CubeCount", "client", "use", "backends", "StreamId", "stream",
    "LaunchMode", "launch_mode", "dry_run", "real_run", "Tuner", "hookimpl",
    "CubeError", "LaunchFailure", "CompileError", "ForeignHandleError", "CaptureError", "DeviceFault",
    "BackendNotFound",
}


def test_every_name_in_all_exists():
    """Each name in ``__all__`` is an attribute of the package, listed once."""
    missing = [n for n in cube.__all__ if not hasattr(cube, n)]
    assert not missing
    assert len(cube.__all__) == len(set(cube.__all__))


def test_promised_names_exported():
    """Everything api.md names at top level is in ``__all__``; so are the plugin essentials."""
    assert PROMISED <= set(cube.__all__), PROMISED - set(cube.__all__)
    assert {"BACKEND_API_VERSION", "LaunchEvent", "TaskEvent", "Client", "Handle", "__version__"} <= set(cube.__all__)
    assert cube.LaunchMode.EXECUTE and cube.LaunchMode.SKIP
    assert callable(cube.CubeCount.dynamic)


@pytest.mark.skipif(not API_MD.exists(), reason="design notes not present")
def test_api_md_cube_names_exported():
    """Every ``cube.<name>`` api.md mentions exists (attributes of classes are not module names)."""
    text = API_MD.read_text()
    names = {m for m in re.findall(r"\bcube\.([A-Za-z_]\w*)", text)}
    missing = {n for n in names if not hasattr(cube, n)}
    assert not missing, missing


def test_no_public_name_outside_all():
    """Every public module-level name of ``numba_cube`` is in ``__all__`` or is a submodule:
    nothing becomes public by accident (import helpers under a leading underscore)."""
    stray = []
    for name, value in vars(cube).items():
        if name.startswith("_") or name in cube.__all__:
            continue
        if isinstance(value, types.ModuleType) and value.__name__.startswith("numba_cube."):
            continue
        if isinstance(value, __future__._Feature):
            continue  # `from __future__ import annotations`
        stray.append(name)
    assert not stray, stray


def test_error_tree_matches_api_md():
    """The tree of api.md "Errors": everything under CubeError, ForeignHandleError also a
    ValueError, BackendNotFound also a LookupError; the same classes in ``numba_cube.errors``."""
    from numba_cube import errors

    for name in ("LaunchFailure", "CompileError", "ForeignHandleError", "CaptureError", "DeviceFault",
                 "BackendNotFound"):
        cls = getattr(cube, name)
        assert cls is getattr(errors, name)
        assert issubclass(cls, cube.CubeError) and cls.__bases__[0] is cube.CubeError
    assert issubclass(cube.CubeError, Exception)
    assert issubclass(cube.ForeignHandleError, ValueError)
    assert issubclass(cube.BackendNotFound, LookupError)
    failure = cube.LaunchFailure(IndexError("x"), "k-1")
    assert isinstance(failure.root, IndexError) and failure.kernel_id == "k-1"
    assert set(errors.__all__) <= set(cube.__all__)


def test_bad_input_errors_and_warnings_are_exported_with_their_builtins():
    """The typed errors of bad input derive from CubeError and from the builtin that names the
    situation (so ``except TypeError`` keeps working), and the warning for a failure no buffer
    carries is a CubeWarning and a RuntimeWarning; all are top-level names (``-W
    error::numba_cube.UnrecordedFailureWarning`` needs that)."""
    from numba_cube import errors

    for name, builtin in (("LaunchArgumentError", TypeError), ("DTypeError", TypeError),
                          ("ShapeError", ValueError), ("StreamIdError", TypeError),
                          ("OptionError", TypeError), ("LaunchModeError", RuntimeError)):
        cls = getattr(cube, name)
        assert cls is getattr(errors, name) and name in cube.__all__
        assert cls.__bases__ == (cube.CubeError, builtin)
    assert issubclass(cube.CubeWarning, UserWarning)
    assert cube.UnrecordedFailureWarning.__bases__ == (cube.CubeWarning, RuntimeWarning)
    failure = cube.LaunchFailure(ValueError("x"), "k-1")
    assert cube.UnrecordedFailureWarning("lost", failure).failure is failure


def test_plugin_surface():
    """``numba_cube.hookimpl`` is the marker of the ``numba_cube`` project, and the hook
    specifications api.md requires exist (backend registration and a launch observer)."""
    from numba_cube import hookspecs

    assert cube.hookimpl is hookspecs.hookimpl and hookspecs.PROJECT_NAME == "numba_cube"
    for hook in ("numba_cube_register_backends", "numba_cube_launch", "numba_cube_task_done",
                 "numba_cube_client_created"):
        assert callable(getattr(hookspecs, hook))
        assert getattr(hookspecs, hook).__doc__


def test_library_logging_conventions():
    """The ``numba_cube`` logger has a NullHandler (a library does not configure logging), and
    the package ships ``py.typed`` as package data."""
    handlers = logging.getLogger("numba_cube").handlers
    assert any(isinstance(h, logging.NullHandler) for h in handlers)
    assert (Path(cube.__file__).parent / "py.typed").exists()
    pyproject = (Path(cube.__file__).parent.parent / "pyproject.toml")
    if pyproject.exists():
        assert 'numba_cube = ["py.typed"]' in pyproject.read_text()
