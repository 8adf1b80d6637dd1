"""The public API (``numba_cube/API.md``) is what ``import numba_cube as cube`` exports, and
``__all__`` is honest: every name in it exists, every name API.md lists is there with the kind it
gives, every other public module-level name is a submodule, and the error tree has the documented
shape. The design documents ship in the repository: nothing in it points outside."""

from __future__ import annotations

import __future__
import enum
import functools
import inspect
import logging
import re
import types
from pathlib import Path

import numba_cube as cube

REPO = Path(__file__).resolve().parents[1]
# Read from the checkout, next to this file, not from the installed package: only tests read the
# documents, and a wheel need not carry them.
API_MD = REPO / "numba_cube" / "API.md"

# The names API.md has promised at top level since the first release (a floor: the document may
# add names, never drop these).
PROMISED = {
    "kernel", "CubeDim", "CubeCount", "client", "use", "backends", "StreamId", "stream",
    "LaunchMode", "launch_mode", "dry_run", "real_run", "Tuner", "hookimpl",
    "CubeError", "LaunchFailure", "CompileError", "ForeignHandleError", "CaptureError", "DeviceFault",
    "BackendNotFound",
}

# A table row of API.md: | `cube.<dotted name>` | <kind> | what |
_ROW = re.compile(r"^\| `cube\.([A-Za-z_][\w.]*)` \| (\w+) \|", re.MULTILINE)


def _api_rows() -> dict[str, str]:
    rows = dict(_ROW.findall(API_MD.read_text(encoding="utf-8")))
    assert rows, f"no name table found in {API_MD}"
    return rows


def _top_level_kind(value) -> str:
    if isinstance(value, type):
        if issubclass(value, Warning):
            return "warning"
        if issubclass(value, BaseException):
            return "exception"
        if issubclass(value, enum.Enum):
            return "enum"
        return "class"
    if inspect.isfunction(value) or inspect.isbuiltin(value):
        return "function"
    if callable(value):
        return "marker"          # a callable object, e.g. pluggy's HookimplMarker
    return "constant"


def _member_kind(owner: type, name: str) -> str | None:
    """The kind of ``owner.name`` as declared in the class (not as an instance sees it)."""
    for klass in owner.__mro__:
        if name in vars(klass):
            raw = vars(klass)[name]
            break
    else:
        return None
    if isinstance(raw, classmethod):
        return "classmethod"
    if isinstance(raw, (property, functools.cached_property)):
        return "property"
    if inspect.isfunction(raw):
        return "method"
    # a slot (member descriptor), a dataclass field's default, a plain class attribute
    return "attribute"


def test_every_name_in_all_exists():
    """Each name in ``__all__`` is an attribute of the package, listed once."""
    missing = [n for n in cube.__all__ if not hasattr(cube, n)]
    assert not missing
    assert len(cube.__all__) == len(set(cube.__all__))


def test_promised_names_exported():
    """Everything API.md has promised at top level is in ``__all__`` and still listed in API.md;
    so are the plugin essentials."""
    assert PROMISED <= set(cube.__all__), PROMISED - set(cube.__all__)
    listed = {name for name in _api_rows() if "." not in name}
    assert PROMISED <= listed, PROMISED - listed
    assert {"BACKEND_API_VERSION", "LaunchEvent", "TaskEvent", "Client", "Handle", "__version__"} <= set(cube.__all__)
    assert cube.LaunchMode.EXECUTE and cube.LaunchMode.SKIP
    assert callable(cube.CubeCount.dynamic)


def test_api_md_names_exist_with_their_kind():
    """Every name of API.md's tables exists with the kind the table gives: top-level names in
    ``__all__`` (function, class, enum, exception, warning, marker, constant), members of a class
    as declared on it (method, classmethod, property, attribute)."""
    wrong = []
    for dotted, kind in _api_rows().items():
        head, *rest = dotted.split(".")
        if not hasattr(cube, head) or head not in cube.__all__:
            wrong.append(f"cube.{dotted}: not exported")
            continue
        value = getattr(cube, head)
        if not rest:
            actual = _top_level_kind(value)
        elif len(rest) == 1 and isinstance(value, type):
            actual = _member_kind(value, rest[0])
        else:
            actual = None
        if actual != kind:
            wrong.append(f"cube.{dotted}: documented {kind}, is {actual}")
    assert not wrong, wrong


def test_every_exported_name_is_documented():
    """API.md lists every name of ``__all__`` (``__version__`` aside): a public name nobody
    documented is public by accident."""
    listed = {name for name in _api_rows() if "." not in name}
    undocumented = set(cube.__all__) - listed - {"__version__"}
    assert not undocumented, undocumented


def test_api_md_cube_names_exported():
    """Every ``cube.<name>`` API.md mentions anywhere in its text exists (attributes of classes
    are not module names)."""
    text = API_MD.read_text(encoding="utf-8")
    names = set(re.findall(r"\bcube\.([A-Za-z_]\w*)", text))
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
    """The tree of API.md "Errors and warnings": everything under CubeError, ForeignHandleError
    also a ValueError, BackendNotFound also a LookupError; the same classes in
    ``numba_cube.errors``."""
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
    specifications API.md names exist (backend registration and the observers)."""
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


# -- the repository is self-contained ------------------------------------------------------------

# What the self-containment check reads: the shipped tree, not build outputs or caches.
_CHECKED = ("numba_cube", "tests", "plugins", "benchmarks", ".ci", "README.md", "pyproject.toml")
_SKIPPED_DIRS = {"__pycache__", ".pytest_cache", ".hypothesis", "build", "dist"}
# Spelled in two parts so that this file does not find itself.
_OUTSIDE = "../" + "shared"
# A markdown file named in text: a path-like token ending in ``.md`` (``CONTRACT.md``,
# ``numba_cube/API.md``, ``../README.md``), not part of a URL.
_MD_CITATION = re.compile(r"(?<![\w/.:-])((?:\.\.?/)*[\w-][\w./-]*\.md)\b")


def _repo_text_files():
    for top in _CHECKED:
        path = REPO / top
        files = [path] if path.is_file() else sorted(path.rglob("*")) if path.is_dir() else []
        for file in files:
            rel = file.relative_to(REPO)
            skipped = any(p in _SKIPPED_DIRS or p.endswith(".egg-info") for p in rel.parts)
            if skipped or not file.is_file():
                continue
            data = file.read_bytes()
            if b"\0" in data[:4096]:
                continue  # binary (a cache file, an image)
            try:
                yield rel, data.decode("utf-8")
            except UnicodeDecodeError:
                continue


def _markdown_resolves(citing: Path, cited: str, basenames: set[str]) -> bool:
    """A citation resolves when it names an existing file relative to the citing file or to the
    repository root, or (a bare name, ``CONTRACT.md``) a markdown file of the repository."""
    if "/" not in cited:
        return cited in basenames
    return any((base / cited).resolve().is_file() for base in ((REPO / citing).parent, REPO))


def test_nothing_points_outside_the_repository():
    """No file of the repository (the package, tests, plugins, benchmarks, ``.ci``, README,
    pyproject) mentions the shared folder beside the checkout, and every markdown file a file
    cites exists in the repository: the design the code cites ships with it."""
    files = list(_repo_text_files())
    assert files
    basenames = {p.name for top in _CHECKED for p in
                 ([REPO / top] if (REPO / top).is_file() else (REPO / top).rglob("*.md"))}
    outside, dangling = [], []
    for rel, text in files:
        for lineno, line in enumerate(text.splitlines(), 1):
            if _OUTSIDE in line:
                outside.append(f"{rel}:{lineno}")
            for cited in _MD_CITATION.findall(line):
                if not _markdown_resolves(rel, cited, basenames):
                    dangling.append(f"{rel}:{lineno}: {cited}")
    assert not outside, outside
    assert not dangling, dangling
