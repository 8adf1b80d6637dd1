"""The one exception tree of numba_cube.

Every error the runtime raises on purpose is a ``CubeError``; where a builtin exception already
names the situation, the class also derives from it, so ``except ValueError`` keeps working for
code that does not know about numba_cube (the httpx / attrs convention)::

    CubeError
     ├── LaunchFailure          a buffer was not written; .root (the original exception), .kernel_id
     ├── CompileError           the compile stage refused a kernel (wraps Numba's error, and is
     │    │                     also of its class: CompileError[TypingError])
     │    └── DivergenceError   units that must meet at a barrier or warp intrinsic did not
     │                          (raised by the CPU backend's launch, naming the line)
     ├── ForeignHandleError     also a ValueError; raised on the issuing thread
     ├── CaptureError           raised by stop_capture / start_capture
     ├── DeviceFault            raised by sync(); the device or its thread is broken
     ├── BackendNotFound        also a LookupError
     ├── LaunchArgumentError    also a TypeError; a launch's arguments do not fit the kernel
     ├── DTypeError             also a TypeError; a buffer dtype kernels cannot use (object)
     ├── ShapeError             also a ValueError; a negative, non-integer or too large shape
     ├── LayoutError            also a ValueError; a host array no one device copy can hold
     ├── StreamIdError          also a TypeError; a stream id that is not a StreamId
     ├── OptionError            also a TypeError; a client option the backend does not know
     ├── LaunchModeError        also a RuntimeError; a dry_run/real_run exited without its enter
     └── UnsupportedAPIError    also a NotImplementedError; a numba.cuda host API the drop-in
                                layer (numba_cube.install) does not serve, naming what to use

    CubeWarning                 also a UserWarning
     └── UnrecordedFailureWarning   also a RuntimeWarning; a failure with no buffer to live on

Bad input is refused on the issuing thread, before the hand-off, because the server has no
channel to report it back (and must not be broken by it): launch-time argument mistakes (wrong
count or type of arguments, a bad dynamic count buffer) are ``LaunchArgumentError``; a buffer
that cannot be made is ``DTypeError`` or ``ShapeError``. A launch beyond CUDA's launch limits is
the exception: it is a failure on its write set (root: a ``LaunchArgumentError`` naming the
limit), as the CUDA driver would refuse it when the launch is dispatched.

Which input raises what (the device keeps working after each):

| input | error |
| --- | --- |
| ``empty(-5)``, a byte size that overflows | ``ShapeError`` (a ``ValueError``) |
| a handle of dtype ``object`` | ``DTypeError`` (a ``TypeError``) |
| ``set_stream([1])``, ``cube.stream("x")`` | ``StreamIdError`` (a ``TypeError``) |
| a misspelt client option (``boundcheck=True``) | ``OptionError``, listing the known ones (a ``TypeError``) |
| an int no kernel type holds, an unsupported argument, a count buffer that is not 3 ``uint32``, a bad ``shared_bytes`` | ``LaunchArgumentError`` (a ``TypeError``), before anything is queued |
| a host array that is no contiguous block (``a[:, ::2]``) given to ``kernel[count, dim](...)`` | ``LayoutError`` (a ``ValueError``), as numba-cuda refuses it |
| ``dry_run().__exit__()`` without its enter | ``LaunchModeError`` (a ``RuntimeError``) |
| ``profile()``, or an allocation the pool cannot serve, in a capture window | ``CaptureError`` at the call |
| a launch beyond CUDA's limits (1024 units a cube, grid 2^31-1 x 65535 x 65535), on every backend | a ``LaunchFailure`` on its write set, as the driver would refuse it |

A launch that fails and writes no buffer has nowhere to record its failure: a numba-style launch
raises it at the call; ``client.launch`` reports it as an ``UnrecordedFailureWarning`` (see
``runtime/ledger/outcomes.py``), which ``-W error::numba_cube.UnrecordedFailureWarning`` makes fatal.
"""

from __future__ import annotations

__all__ = [
    "CubeError",
    "LaunchFailure",
    "CompileError",
    "DivergenceError",
    "ForeignHandleError",
    "CaptureError",
    "DeviceFault",
    "BackendNotFound",
    "LaunchArgumentError",
    "DTypeError",
    "ShapeError",
    "LayoutError",
    "StreamIdError",
    "OptionError",
    "LaunchModeError",
    "UnsupportedAPIError",
    "CubeWarning",
    "UnrecordedFailureWarning",
]


class CubeError(Exception):
    """Base class of every error numba_cube raises on purpose."""


class CompileError(CubeError):
    """The compile stage refused a kernel.

    ``construct`` names what could not be compiled (e.g. ``"cuda.syncthreads() under a
    unit-dependent condition"``) and ``lineno`` the line in the kernel's source file, when known.
    ``__cause__`` carries Numba's own error where there is one.
    """

    def __init__(self, message: str, *, construct: str | None = None,
                 lineno: int | None = None, filename: str | None = None):
        self.construct = construct
        self.lineno = lineno
        self.filename = filename
        where = ""
        if filename and lineno:
            where = f" ({filename}, line {lineno})"
        elif lineno:
            where = f" (line {lineno})"
        # Not super(): in a class combined with a compiler's own error (``wrapping``) the next
        # class is that error's, whose __init__ takes its own arguments.
        Exception.__init__(self, message + where)

    @classmethod
    def wrapping(cls, message: str, cause: BaseException) -> "CompileError":
        """A ``CompileError`` for a compiler's own error ``cause`` (Numba's ``TypingError``, say),
        with ``cause`` as ``__cause__``. It is also an instance of ``cause``'s class where the
        two combine (``CompileError[TypingError]``), so code written for numba.cuda that catches
        ``TypingError`` around a launch catches it through numba_cube as well."""
        err = BaseException.__new__(_combined(cls, type(cause), "CompileError"))
        err.__init__(message)
        err.__cause__ = cause
        return err

    def __reduce__(self):
        # A combined class is made at run time: rebuild it in the process that unpickles (a Dask
        # worker, say) from the compiler error's class, which is importable.
        extra = [b for b in type(self).__bases__ if not issubclass(b, CompileError)]
        return (_restore_compile_error, (self.args, self.construct, self.lineno, self.filename,
                                         extra[0] if extra else None))


class DivergenceError(CompileError):
    """Units that must reach a barrier, grid sync or warp intrinsic together did not.

    Raised by a launch (so it lands on the launch's write set as the root of a
    ``LaunchFailure``): the kernel translated, but at run time its units disagreed where CUDA
    requires them to agree, so a GPU would hang or compute undefined values. ``lineno`` and
    ``filename`` name the construct's line in the user's source.
    """

    def __init__(self, message: str, lineno: int | None = None, filename: str | None = None):
        CompileError.__init__(self, message, construct="divergent synchronisation",
                              lineno=lineno, filename=filename)

    def __reduce__(self):
        return (_restore_divergence, (self.args, self.lineno, self.filename))


def _restore_divergence(args, lineno, filename):
    err = BaseException.__new__(DivergenceError)
    Exception.__init__(err, *args)
    err.construct, err.lineno, err.filename = "divergent synchronisation", lineno, filename
    return err


def _restore_compile_error(args, construct, lineno, filename, cause_type):
    cls = _combined(CompileError, cause_type, "CompileError") if cause_type else CompileError
    err = BaseException.__new__(cls)
    Exception.__init__(err, *args)
    err.construct, err.lineno, err.filename = construct, lineno, filename
    return err


class LaunchFailure(CubeError):
    """A buffer was not written because a launch failed.

    ``root`` is the original exception (the first failure of the chain), ``kernel_id`` the kernel
    whose launch failed first, and ``chain`` the ids of the launches the failure travelled through
    to reach this buffer, root first.

    A ``LaunchFailure`` is also an instance of its root's class where that class allows it
    (``LaunchFailure[ZeroDivisionError]`` derives from both): numba.cuda raises a kernel's own
    exception, so ``except IndexError`` around a numba-style launch keeps working, and
    ``except cube.LaunchFailure`` catches every launch failure whatever its root.
    """

    def __new__(cls, root: BaseException, kernel_id: str | None = None,
                chain: tuple[str, ...] = ()):
        if cls is LaunchFailure:
            cls = _with_root_class(type(root))
        # BaseException's own __new__, not the root class's: OSError's, for one, would read the
        # arguments as (errno, strerror, filename).
        return BaseException.__new__(cls)

    def __reduce__(self):
        # The combined classes are made at run time: rebuild through __new__, which makes the
        # same class again in the process that unpickles it (a Dask worker, say).
        # Notes (``add_note``: where a failure was seen, e.g. which Dask worker) travel as state.
        notes = getattr(self, "__notes__", None)
        state = {"__notes__": list(notes)} if notes else None
        return (LaunchFailure, (self.root, self.kernel_id, self.chain), state)

    def __init__(self, root: BaseException, kernel_id: str | None,
                 chain: tuple[str, ...] = ()):
        # The root's own attributes (a CompileError's ``construct`` and ``lineno``, a user
        # exception's fields) read the same through the failure as through the root.
        for name, value in getattr(root, "__dict__", {}).items():
            setattr(self, name, value)
        self.root = root
        self.kernel_id = kernel_id
        self.chain = tuple(chain)
        msg = f"kernel {kernel_id!r} failed: {type(root).__name__}: {root}"
        if len(self.chain) > 1:
            msg += "\n  reached this buffer through: " + " -> ".join(self.chain)
        # Not super(): the next class may be the root's, whose __init__ takes its own arguments.
        Exception.__init__(self, msg)

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


_ROOT_CLASSES: dict = {}


def _combined(base: type, root_type: type, label: str) -> type:
    """``base`` combined with ``root_type`` (``label[Root]``, deriving from both), or ``base``
    itself where the two cannot be combined (see ``_with_root_class``)."""
    key = (base, root_type)
    combined = _ROOT_CLASSES.get(key)
    if combined is None:
        combined = base
        if (issubclass(root_type, Exception) and not issubclass(root_type, base)
                and not issubclass(root_type, (StopIteration, StopAsyncIteration))):
            try:
                combined = type(f"{label}[{root_type.__name__}]", (base, root_type),
                                {"__module__": __name__, "__doc__": base.__doc__})
                BaseException.__new__(combined)      # refused where the root's layout needs its own
            except TypeError:
                combined = base
        _ROOT_CLASSES[key] = combined
    return combined


def _with_root_class(root_type: type) -> type:
    """``LaunchFailure`` combined with ``root_type``, or ``LaunchFailure`` itself where the two
    cannot be combined: a root that is already a ``LaunchFailure``, one that is not an
    ``Exception`` (``KeyboardInterrupt``), ``StopIteration`` (which changes meaning inside
    generators), or one whose instances need their class's own
    ``__new__`` (``OSError``).
    The root class's own ``__init__`` and ``__str__`` are never used (``LaunchFailure`` comes
    first and initialises the exception itself), so any exception class combines."""
    return _combined(LaunchFailure, root_type, "LaunchFailure")


class ForeignHandleError(CubeError, ValueError):
    """A handle of another device was passed to this client."""


class CaptureError(CubeError):
    """A graph capture was refused, or an operation inside its window was."""


class DeviceFault(CubeError):
    """The device (or the thread that owns it) is broken; raised by ``sync()``."""


class BackendNotFound(CubeError, LookupError):
    """No backend of that name is registered."""


class LaunchArgumentError(CubeError, TypeError):
    """A launch's arguments do not fit the kernel (count, type, geometry)."""


class DTypeError(CubeError, TypeError):
    """A buffer of this dtype cannot be made: it would hold Python objects (``dtype=object``),
    which have no meaning in device memory and no kernel type; or the dtype is not one NumPy
    understands."""


class ShapeError(CubeError, ValueError):
    """A buffer of this shape cannot be made: a negative or non-integer dimension, or a byte size
    beyond what one buffer can address. Nothing was allocated."""


class LayoutError(CubeError, ValueError):
    """A host array whose elements are not one contiguous block of memory in C or F order, nor
    a broadcast of one, passed to a numba-style launch: numba.cuda refuses it (``ValueError``:
    "Array contains non-contiguous buffer"), and so does numba_cube, instead of launching on a
    copy whose writes would not reach the caller's array as numba's would."""


class StreamIdError(CubeError, TypeError):
    """A stream id that is not a ``StreamId`` (make one with ``cube.StreamId.new()``)."""


class OptionError(CubeError, TypeError):
    """A client option the device's backend does not know (``cube.client("cpu", boundcheck=True)``);
    the message lists the ones it knows."""


class LaunchModeError(CubeError, RuntimeError):
    """A ``dry_run``/``real_run`` was exited without being entered (or exited twice, or on another
    thread than the one that entered a real run). The launch-mode depths are left as they were."""


class UnsupportedAPIError(CubeError, NotImplementedError):
    """A numba.cuda host API (or one use of it) that the drop-in layer (``numba_cube.install``,
    ``numba_cube/dropin/``) does not serve: the message names the API and what to use instead.
    Raised on the call, never later, so nothing runs differently from numba.cuda unnoticed."""

    def __init__(self, api: str, instead: str):
        super().__init__(f"{api} is not served by numba_cube's drop-in numba.cuda layer on this "
                         f"backend: {instead}")
        #: the numba.cuda name (``cuda.external_stream``, ``DeviceNDArray.get_ipc_handle``)
        self.api = api


class CubeWarning(UserWarning):
    """Base class of every warning numba_cube issues."""


class UnrecordedFailureWarning(CubeWarning, RuntimeWarning):
    """A ``client.launch`` failed and wrote no buffer its failure could be recorded on.

    ``failure`` is the ``LaunchFailure`` (``.root``, ``.kernel_id``) a read would have raised.
    Issued on the launching thread at its next ``read``/``read_many``/``sync_buffers``/``sync``,
    or at any thread's next ``sync()`` (``runtime/ledger/outcomes.py`` says why).
    """

    def __init__(self, message: str, failure: LaunchFailure | None = None):
        super().__init__(message)
        self.failure = failure
