"""Dynamic cube counts on the GPU without a host round trip: the device-count kernel.

CONTRACT.md section 5: ``CubeCount.dynamic(handle)`` takes the grid from three ``uint32`` in a
device buffer written by earlier device work. Two ways to launch such a kernel:

**Read-back (the baseline, always available).** Before the execute scope opens, copy the 12
bytes to the host on the launch's stream and wait for them (``cuMemcpyDtoHAsync`` +
``cuStreamSynchronize``), then launch with that grid. Exact semantics (a zero count dispatches
nothing and claims nothing; a count beyond CUDA's limits is a failure on the write set), but the
host waits for everything queued before on that stream, and the launch cannot be recorded into a
CUDA graph.

**Device count (this module).** Launch a *wrapper* kernel on a fixed grid of ``B`` cubes (as many
as can be resident at once: SM count times the kernel's occupancy), each of which reads the count
from device memory and walks the *virtual* cubes ``v = blockIdx.x, blockIdx.x + B, ...`` below
``x * y * z``, running the user's kernel body for each with ``blockIdx`` and ``gridDim`` replaced
by the virtual cube's index and the count. Cubes beyond the count exit at once. No host round
trip, nothing blocks, and the launch is an ordinary static launch: it can be captured in a graph.

How the body is made: the kernel's source is parsed (``ast``) and rewritten into a device
function taking six extra parameters (virtual block index and count):

    cuda.blockIdx.x / .y / .z  ->  the virtual cube index
    cuda.gridDim.x  / .y / .z  ->  the count
    cuda.grid(n), cuda.gridsize(n)  ->  the same expressions over those

and the wrapper calls it once per virtual cube, with a ``cuda.syncthreads()`` between iterations
(a later iteration may reuse shared memory that slower units of the block still read). The loop
bound is the same for every unit of a cube, so barriers inside the body stay uniform.

A kernel is *eligible* only if the rewrite is certain to catch every use of the grid geometry:
its source is available, it is not a closure, every ``blockIdx``/``gridDim``/``grid``/``gridsize``
is reached as an attribute of the ``numba.cuda`` module object by a global name (``from
numba.cuda import blockIdx`` or ``b = cuda.blockIdx`` is refused), ``grid``/``gridsize`` take a
literal, and no device function it calls mentions those names. Otherwise the launch falls back to
the read-back.

Where the two differ (documented contract deviations of the device count): the host never sees
the count, so (1) a count beyond CUDA's grid limits runs (a loop has no limit) instead of failing,
and (2) a zero count still opens the execute scope. (2) matters only when an output already
carries a failure (the scope would clean it although nothing was written): the server then uses
the read-back for that launch, so the ledger stays exact.
"""

from __future__ import annotations

import ast
import inspect
import logging
import sys
import textwrap

import numpy as np

from numba_cube.runtime.launch.dispatch import run_recorded
from numba_cube.runtime.ledger.ledger import failed_writing
from numba_cube.backends.cuda.driver.errors import CudaError

log = logging.getLogger("numba_cube")

__all__ = ["Ineligible", "device_count_kernel", "DynamicCounts", "PREFIX"]

PREFIX = "_numba_cube_dyn_"
_GEOMETRY = ("blockIdx", "gridDim", "grid", "gridsize")
_AXES = ("x", "y", "z")


class Ineligible(Exception):
    """The kernel cannot be rewritten with certainty; the reason is the message."""


def _cuda_modules() -> tuple:
    mods = []
    for name in ("numba.cuda", "numba.cuda.simulator"):
        mod = sys.modules.get(name)
        if mod is not None:
            mods.append(mod)
    return tuple(mods)


def _cuda_aliases(py_func) -> set:
    mods = _cuda_modules()
    return {name for name in py_func.__code__.co_names
            if any(py_func.__globals__.get(name) is m for m in mods)}


def _function_def(py_func) -> ast.FunctionDef:
    try:
        source = textwrap.dedent(inspect.getsource(py_func))
    except (OSError, TypeError) as exc:
        raise Ineligible(f"source of {py_func.__name__} is not available ({exc})") from None
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == py_func.__name__:
            return node
    raise Ineligible(f"no definition of {py_func.__name__} in its source")


def _v(name: str) -> ast.Name:
    return ast.Name(id=PREFIX + name, ctx=ast.Load())


def _attr(mod: str, *path: str) -> ast.expr:
    node: ast.expr = ast.Name(id=mod, ctx=ast.Load())
    for p in path:
        node = ast.Attribute(value=node, attr=p, ctx=ast.Load())
    return node


class _Rewrite(ast.NodeTransformer):
    """Replace the grid geometry of the body by the virtual cube's (see module docstring)."""

    def __init__(self, aliases: set):
        self.aliases = aliases
        self.mod = next(iter(sorted(aliases)))

    def _is_mod(self, node) -> bool:
        return isinstance(node, ast.Name) and node.id in self.aliases

    def visit_Attribute(self, node: ast.Attribute):
        inner = node.value
        if isinstance(inner, ast.Attribute) and self._is_mod(inner.value) and inner.attr in ("blockIdx", "gridDim") \
                and node.attr in _AXES:
            prefix = "b" if inner.attr == "blockIdx" else "g"
            return ast.copy_location(_v(prefix + node.attr), node)
        return self.generic_visit(node)

    def visit_Call(self, node: ast.Call):
        f = node.func
        if isinstance(f, ast.Attribute) and self._is_mod(f.value) and f.attr in ("grid", "gridsize"):
            if len(node.args) != 1 or node.keywords or not isinstance(node.args[0], ast.Constant) \
                    or node.args[0].value not in (1, 2, 3):
                raise Ineligible(f"cuda.{f.attr}() with a non-literal dimension")
            n = node.args[0].value
            parts = []
            for axis in _AXES[:n]:
                block_dim = _attr(self.mod, "blockDim", axis)
                if f.attr == "grid":
                    parts.append(ast.BinOp(ast.BinOp(_v("b" + axis), ast.Mult(), block_dim), ast.Add(),
                                           _attr(self.mod, "threadIdx", axis)))
                else:
                    parts.append(ast.BinOp(_v("g" + axis), ast.Mult(), block_dim))
            out = parts[0] if n == 1 else ast.Tuple(elts=parts, ctx=ast.Load())
            return ast.copy_location(out, node)
        return self.generic_visit(node)


def _check_rest(fdef: ast.FunctionDef, aliases: set, py_func) -> None:
    """After the rewrite nothing may still name the geometry; called functions are checked too."""
    for node in ast.walk(fdef):
        if isinstance(node, ast.Name) and node.id in _GEOMETRY:
            raise Ineligible(f"{node.id} used as a bare name (line {getattr(node, 'lineno', '?')})")
        if isinstance(node, ast.Attribute) and node.attr in _GEOMETRY:
            raise Ineligible(f".{node.attr} used other than as cuda.{node.attr}.<axis> "
                             f"(line {getattr(node, 'lineno', '?')})")
        if isinstance(node, ast.Call):
            name, target = _resolve_callee(node.func, py_func.__globals__, aliases)
            inner = getattr(target, "py_func", None)
            if inner is not None:
                try:
                    text = inspect.getsource(inner)
                except (OSError, TypeError):
                    raise Ineligible(f"device function {name} has no source to check") from None
                if any(word in text for word in _GEOMETRY):
                    raise Ineligible(f"device function {name} uses the grid geometry")


def _resolve_callee(func: ast.expr, globs: dict, aliases: set):
    """``(dotted name, object)`` of a called global (``f(...)`` or ``mod.f(...)``), else
    ``(name, None)``. Calls into numba.cuda itself are the rewrite's business, not a callee's."""
    path = []
    while isinstance(func, ast.Attribute):
        path.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name) or func.id in aliases:
        return "?", None
    obj = globs.get(func.id)
    for attr in reversed(path):
        obj = getattr(obj, attr, None)
    return ".".join([func.id] + list(reversed(path))), obj


def device_count_kernel(py_func):
    """The wrapper kernel of ``py_func`` for device-side dynamic counts: a Python function
    ``wrapper(count, *params)`` in numba.cuda's dialect (count: a ``uint32[3]`` array).

    Raises ``Ineligible`` when the rewrite cannot be certain (see the module docstring)."""
    if py_func.__code__.co_freevars:
        raise Ineligible(f"{py_func.__name__} is a closure")
    aliases = _cuda_aliases(py_func)
    if not aliases:
        raise Ineligible(f"{py_func.__name__} does not reach numba.cuda through a global name")
    fdef = _function_def(py_func)
    if fdef.args.vararg or fdef.args.kwarg or fdef.args.kwonlyargs or fdef.args.posonlyargs:
        raise Ineligible("kernels with *args, **kwargs or keyword-only parameters")
    params = [a.arg for a in fdef.args.args]
    if any(p.startswith(PREFIX) for p in params):
        raise Ineligible("parameter names clash with the rewrite's")
    body_def = _Rewrite(aliases).visit(fdef)
    _check_rest(body_def, aliases, py_func)
    mod = sorted(aliases)[0]
    extra = [PREFIX + n for n in ("bx", "by", "bz", "gx", "gy", "gz")]
    body_def.name = PREFIX + "body"
    body_def.decorator_list = []
    body_def.returns = None
    body_def.args = ast.arguments(posonlyargs=[], args=[ast.arg(arg=p) for p in params + extra],
                                  vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])
    call_args = ", ".join(params + extra)
    wrapper_src = textwrap.dedent(f"""
    def {PREFIX}kernel({PREFIX}count{''.join(', ' + p for p in params)}):
        {PREFIX}gx = int({PREFIX}count[0])
        {PREFIX}gy = int({PREFIX}count[1])
        {PREFIX}gz = int({PREFIX}count[2])
        {PREFIX}total = {PREFIX}gx * {PREFIX}gy * {PREFIX}gz
        {PREFIX}v = int({mod}.blockIdx.x)
        {PREFIX}step = int({mod}.gridDim.x)
        while {PREFIX}v < {PREFIX}total:
            {PREFIX}bx = {PREFIX}v % {PREFIX}gx
            {PREFIX}t = {PREFIX}v // {PREFIX}gx
            {PREFIX}by = {PREFIX}t % {PREFIX}gy
            {PREFIX}bz = {PREFIX}t // {PREFIX}gy
            {PREFIX}body_dev({call_args})
            {mod}.syncthreads()
            {PREFIX}v += {PREFIX}step
    """)
    module = ast.Module(body=[body_def] + ast.parse(wrapper_src).body, type_ignores=[])
    ast.fix_missing_locations(module)
    filename = f"<numba_cube device-count wrapper of {py_func.__module__}.{py_func.__qualname__}>"
    code = compile(module, filename, "exec")
    namespace = dict(py_func.__globals__)
    exec(code, namespace)  # noqa: S102 - code generated above from the kernel's own source
    cuda_mod = namespace[mod]
    namespace[PREFIX + "body_dev"] = cuda_mod.jit(device=True)(namespace[PREFIX + "body"])
    wrapper = namespace[PREFIX + "kernel"]
    wrapper.__qualname__ = f"{py_func.__qualname__}[device count]"
    return wrapper


class DynamicCounts:
    """Which form a dynamic-count launch takes on one device, the wrapper's grid, and the
    read-back. ``mode``: ``"auto"`` (the device count where the kernel allows it) or
    ``"readback"`` (``NUMBA_CUBE_CUDA_DYNAMIC_COUNT=readback``; tests switch it per case)."""

    def __init__(self, driver, sm_count: int, pinned, ledger, raised, mode: str):
        self._driver = driver
        self._sm_count = sm_count
        self._pinned = pinned
        self._ledger = ledger
        self._raised = raised            # CudaContext.raised, bound to the server's mark_broken
        self.mode = mode
        self._wrappers: dict = {}        # kernel id -> device-count wrapper or Ineligible
        self._count_buf = None           # pinned 16 bytes for count read-backs

    def wrapper_of(self, kernel):
        """The device-count wrapper function of ``kernel``, or the ``Ineligible`` reason."""
        found = self._wrappers.get(kernel.id)
        if found is None:
            try:
                found = device_count_kernel(kernel.py_func)
            except Ineligible as exc:
                found = exc
            except Exception as exc:  # noqa: BLE001 - a rewrite bug must not break the launch
                log.debug("device-count rewrite of %s failed", kernel.id, exc_info=True)
                found = Ineligible(f"rewrite failed: {type(exc).__name__}: {exc}")
            self._wrappers[kernel.id] = found
        return found

    def wrapper_grid(self, bound, dim: tuple) -> int:
        """How many cubes the device-count wrapper launches: all that can be resident at once."""
        threads = dim[0] * dim[1] * dim[2]
        grid = bound.wrapper_grids.get(threads)
        if grid is None:
            per_sm = 0
            occupancy = bound.device_count.kernel.occupancy
            if occupancy is not None:
                try:
                    per_sm = occupancy(threads)
                except CudaError:
                    per_sm = 0
            grid = bound.wrapper_grids[threads] = max(1, self._sm_count * max(per_sm, 1))
        return grid

    def readback_run(self, task, rec, count_ptr: int):
        """Resolve a dynamic count by a blocking 12-byte read-back, then dispatch (baseline)."""
        ledger = self._ledger

        def run():
            if ledger.first_failure(rec.reads) is None:
                try:
                    rec.count_view = self._read_count(count_ptr, task.cs.handle)
                except CudaError as exc:
                    failed_writing(ledger, rec.kernel_id, rec.writes, exc)
                    self._raised(exc)
                    task.ran = False
                    return
                # The host is about to read the count: if its writer raised (runtime/
                # runtime/ledger/pending.py), the count is garbage and the launch is skipped as on the CPU.
                # The stream was synchronized: settling waits for nothing new.
                if ledger.has_pending:
                    for region in rec.reads:
                        ledger.settle(region, wait=True)
            if run_recorded(ledger, rec) is None:
                task.ran = False

        return run

    def _read_count(self, ptr: int, stream) -> np.ndarray:
        if self._count_buf is None:
            self._count_buf = self._pinned.get(16)
        buf = self._count_buf
        self._driver.memcpy_dtoh_async(buf.ptr, ptr, 12, stream)
        self._driver.stream_synchronize(stream)
        return buf.array[:12].copy()

    def wrapper_reason(self, kernel) -> str:
        """Why a dynamic count of ``kernel`` is read back (for a capture's refusal)."""
        if self.mode == "readback":
            return "NUMBA_CUBE_CUDA_DYNAMIC_COUNT=readback"
        found = self._wrappers.get(kernel.id)
        if isinstance(found, Exception):
            return f"the kernel has no device-count form: {found}"
        return "an output of the launch carries a failure"
