"""The CPU compile stage: numba.cuda-dialect kernel -> generated njit module (public entry point).

    from numba_cube.backends.cpu.translate import build_program, CpuProgram, TRANSLATOR_VERSION

    prog = build_program(py_func, boundscheck=False, fastmath=False)   # raises CompileError
    prog.source      # the generated module's text (print it to see what runs)
    prog.parallel    # njit(parallel=True, nogil=True, cache=True) dispatcher
    prog.serial      # the same kernel with parallel=False, for small grids
    # both: f(grid_x, grid_y, grid_z, block_x, block_y, block_z, *kernel_args)
    # (with prog.dynamic_shared: f(<geometry>, shared_bytes, *kernel_args))

The geometry comes first, as six int64 values; then the kernel's own arguments in their order
(C-contiguous NumPy arrays of any dtype/ndim, and scalars). To compile without running (dry runs)
call ``prog.parallel.compile((numba.types.int64,) * 6 + argtypes)``; with ``cache=True`` that
compile is served from Numba's on-disk cache when possible. The two variants share one compiled
"chunk" function, so compiling the second one after the first is cheaper.

Exceptions: the serial variant raises what the kernel raises (``IndexError`` with
``boundscheck=True``). Numba does not propagate exceptions out of a parallel region, so for kernels
that can raise (``boundscheck=True``, or a ``raise``/``assert`` in the kernel or a device function)
the parallel variant catches per chunk and re-runs a failed chunk serially to raise the real
exception; other exceptions (e.g. from a NumPy call inside a kernel) may not surface from the
parallel variant.

How a kernel is translated: the folders of this package are the stages, in order (each folder's
``__init__.py`` says what its room is for; ``tests/test_layering.py`` holds a stage to importing
only the stages before it):

1. ``frontend/``: read and parse the source (``source.py``; without source, rebuild the function
   from its bytecode: ``decompiler/``), resolve free names (``resolve.py``: the CUDA module by
   identity), evaluate constants (``constexpr.py``).
2. ``lower/``: CUDA builtins -> hidden names and helpers (``lowering.py``, ``cuda_calls.py``; warp
   intrinsics: ``warps.py``); device functions that need it are inlined (``inline/``).
3. ``analyze/``: uniformity, liveness and purity (``dataflow.py``); for kernels with barriers or
   shared memory, the fission plan (``plan.py``: which code runs once per cube, which per unit,
   between split points); the bounds a unit loop's guards give (``guard_bounds.py``).
4. ``passes/``: each decides one thing: warp-synchronous regions (``lockstep/``), bounds checks
   (``bounds/``), privatized atomics, the scan idiom, guarded and interior regions, spans, loop
   order and stride interchange, demanded lanes, the uniform prologue, constant shapes.
5. ``emit/``: ``module.py`` prints the module: a barrier-free kernel as one flat ``prange`` over
   all units (``flat_kernel.py``), others as a ``prange`` over cubes with a unit loop per region
   (``cube_kernel.py``, ``regions.py``, ``unit_loops.py``, ``warps.py``);
   ``cache/translations.py`` writes it under its content hash and imports it.

What the generated module imports at run time is ``kernel_runtime/`` (atomics, warp helpers,
scans, bounds checks, float16, vector types); its digest is in every module's header.

A warm start skips steps 1-5: given the kernel's id, ``build_program`` looks the translation up
on disk first (``cache/key.py`` names it, ``cache/translations.py`` keeps it sealed with this
user's key), and only on a miss imports the translator and runs it. (Measured by
``benchmarks/bench_launch_modes.py``: the import is 50-60 ms, but most of that is Numba
initialising what its first cache load needs anyway; skipping import and translation saves
about 15 ms of CPU time on a warm first launch.)

For speed the translator picks the order units run in (``passes/loop_order.py``,
``passes/stride_interchange.py``), drops work its rules prove needless
(``passes/demanded_lanes.py``, ``passes/interior.py``, ``passes/scan_idiom.py``) and compiles a
kernel with barriers for the block shape of its first launch (``emit/block_shape.py``; later
shapes share one general compile: ``server.py``); each module's docstring states its rule.

What is supported and what is refused is listed in ``SUPPORTED`` below and checked by the tests in
``tests/backends/cpu/``.

Threading: the ``parallel`` variant runs on Numba's threading layer. Numba's ``workqueue`` layer
aborts the process when two Python threads call parallel functions at once, so a runtime that
launches from several threads must select ``omp`` or ``tbb`` (``numba.config.THREADING_LAYER``)
before the first parallel call.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from numba_cube.backends.cpu import passes
from numba_cube.backends.cpu.cache import key as cachekey, translations as codecache
from numba_cube.errors import CompileError

__all__ = ["build_program", "translate", "translate_source", "translate_stages", "Translation",
           "CpuProgram", "TRANSLATOR_VERSION", "SUPPORTED"]


def __getattr__(name: str):
    # The translator proper (codegen and everything it imports) loads on the first translation,
    # not with this module: a warm start that finds its translation cached never needs it.
    if name in ("Unit", "TRANSLATOR_VERSION"):
        from numba_cube.backends.cpu.emit import module as codegen

        return getattr(codegen, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


SUPPORTED = """\
Supported: cuda.threadIdx/blockIdx/blockDim/gridDim .x/.y/.z; cuda.grid(n) and cuda.gridsize(n) for
n = 1, 2, 3 (tuples for 2 and 3); cuda.warpsize (32), cuda.laneid; cuda.syncthreads() at kernel
level or inside if/while/for (deep fission; loop bounds from constants, shared/local array shapes
and pure math of those are uniform: passes/const_shapes.py), under if/while conditions the
translator cannot prove cube-uniform too, checked at run time (units that disagree fail the launch
with DivergenceError naming the line), and so is a break/continue under such a condition leaving a
loop that contains a barrier (if failed[0]: break, with failed a shared flag every unit reads after
a barrier); cuda.syncthreads_count/and/or, also inside expressions; warps of 32 lanes by linear
thread id: cuda.shfl_sync/shfl_up_sync/shfl_down_sync/shfl_xor_sync,
all_sync/any_sync/eq_sync/ballot_sync, match_any_sync/match_all_sync, syncwarp(mask), activemask(),
lanemask_lt(), with CUDA's mask rules checked at run time (lower/warps.py, kernel_runtime/warps.py);
cuda.cg.this_grid().sync() (grid mode: every cube's state is kept across the split);
cuda.shared.array (per cube) and cuda.local.array (per unit) with constant shapes and scalar dtypes
however numba-cuda accepts them (cuda.float32, numba.float32, numba.types.float32, np.float32,
'float32', ...), positional or by keyword (shape=, dtype=, alignment=), and cuda.shared.array(0,
dtype) (dynamic shared memory, sized by the launch; every declaration, in the kernel or its device
functions, views the same bytes); the scalar types numba.cuda re-exports as casts (cuda.float32(x));
cuda.const.array_like (also ndarray=); cuda.atomic.add/sub/max/min/nanmax/nanmin/exch/cas/
compare_and_swap/and_/or_/xor/inc/dec (real CPU atomics on global arrays, plain read-modify-write on
shared/local arrays); cuda.threadfence*() and cuda.nanosleep() (no-ops); cuda.selp, cuda.fma,
cuda.cbrt; cuda.popc/clz/ffs/brev and x.bit_count() (kernel_runtime/bitops.py); float16 arrays,
scalars and shared/local arrays with numba-cuda's per-operation rounding, and cuda.fp16.*
(kernel_runtime/half.py, kernel_runtime/fp16.py, kernel_runtime/fp16_functions.py);
math.fmod/remainder/nextafter/modf (kernel_runtime/mathcalls.py); vector types such as
cuda.float32x4 (kernel_runtime/vectors.py); record dtypes in global constant arrays and shared/local
arrays (frontend/records.py, lower/dtypes.py); debug=True exceptions that name the raising unit
(lower/raises.py); warp-synchronous memory exchange (units of a region reading what others write
there without a barrier) run in lockstep across the cube, loads of a statement before its stores
(passes/lockstep/schedule.py); early return (with barriers: later regions skip exited units);
per-unit values of any type (numbers, array views, tuples) live across barriers; device functions
(cuda.jit(device=True), with or without signature, cuda.jit kernels called from a kernel, and numba
njit functions), recursively, translated into the same module, and inlined where they declare shared
memory, call barriers or take compile-time arguments (cuda.atomic.add, device functions, dtypes,
shapes; *args); nested functions (closures); array shapes from literals, module or closure constants
and local names assigned once; math.*, NumPy functions and scalar types; global scalar/tuple
constants and small global arrays frozen into the generated text; the numba.cuda simulator's module;
numba-cuda-mlir's dialect (from numba_cuda_mlir import cuda: its builtins, its copies of Numba's
type objects and its cuda.jit dispatchers; kernel/dialects.py).

Refused with CompileError (construct + line): a barrier or warp intrinsic in a 'for' loop over
a range that is not provably cube-uniform; warp-synchronous memory exchange in a loop that units
leave at different rounds (break/continue under a unit-dependent condition); break/continue
under a unit-dependent condition leaving a loop of warp intrinsics without a barrier, a
'while' whose own condition is not provably uniform, or any loop of a kernel that syncs the
grid; recursion, 'return' inside a loop, or a lazily evaluated call (and/or, while
condition) of an inlined device function; warp intrinsics and
barrier reductions in conditionally evaluated expressions (right of and/or, x if c else y);
a width argument to the shuffles (numba-cuda has none); cooperative groups other than
this_grid().sync(); syncthreads_count/and/or or dynamic shared memory in a kernel that syncs the
grid; bfloat16 (and numba-cuda-mlir's complex32) array elements; other CUDA builtins
(cuda.fp16.htanh_approx, ...); with/try/lambda/global/nonlocal/
yield/:=/del; kernels returning a value; plain Python (non-jitted) function calls; identifiers
containing '__' (reserved for generated names).

Kernels and device functions without source (made by exec, typed into a REPL) are rebuilt from
their bytecode (``frontend/decompiler/function.py``) and then translated like any other, with the same support and
refusals; source is read only where it compiles to the function's own bytecode.
"""


@dataclass(frozen=True)
class CpuProgram:
    """A translated kernel: generated source plus its two compiled-on-demand variants."""

    source: str
    parallel: object          # numba dispatcher, parallel=True
    serial: object            # numba dispatcher, parallel=False
    kernel_name: str
    module_name: str
    path: str                 # the generated module's file in the cache directory
    shape: str                # "flat" (barrier-free) or "cube" (fission)
    #: takes the dynamic shared memory size (int64 bytes) after the geometry
    #: (lower/dynamic_shared.py)
    dynamic_shared: bool = False
    #: the arrays whose subscripts a ``boundscheck=True`` module checks
    #: (``passes/bounds/checks.py``)
    bounds_sites: tuple = ()
    #: the chunk function both twins call: ``chunk(c, nchunks, <geometry>, *args)`` runs chunk
    #: ``c`` of ``nchunks``; ``chunk(0, 1, ...)`` is the serial twin's whole work
    chunk: object = None
    #: a kernel that can raise: its parallel variant reporting the first failed piece instead
    #: of raising (``emit/entry_points._guarded_parallel``); None for the others
    parallel_status: object = None


@dataclass(frozen=True)
class Translation:
    """What the translator makes of a kernel: the module text and the facts the program needs."""

    source: str
    kernel_name: str          # the generated functions are <kernel_name>__par / __ser
    shape: str
    dynamic_shared: bool

    @classmethod
    def from_record(cls, record: dict) -> Translation | None:
        """The translation a verified cache record describes, or None if it is not one."""
        try:
            found = cls(**record)
        except TypeError:                           # other fields: another version wrote it
            return None
        kinds = (str, str, str, bool)
        values = (found.source, found.kernel_name, found.shape, found.dynamic_shared)
        return found if all(isinstance(v, k) for v, k in zip(values, kinds)) else None


def translate(py_func, boundscheck: bool = False, fastmath: bool | tuple = False,
              error_model: str = "numpy") -> Translation:
    """Run the translator on ``py_func``: nothing is written or imported but the translator."""
    from numba_cube.backends.cpu.emit.module import Unit
    from numba_cube.backends.cpu.passes.lockstep.schedule import refuses_lockstep

    unit = Unit(py_func, boundscheck, fastmath, error_model)
    try:
        text = unit.generate()
    except CompileError as exc:
        if not refuses_lockstep(exc):
            raise
        # Lockstep through global memory could not be kept (a unit-dependent loop or exit
        # around the exchange: stumpy's grid-stride loop writing QT_out[0] from every unit).
        # Global memory has no lockstep guarantee there on a GPU either (warps of other cubes,
        # independent thread scheduling within one): units one after another is a schedule a GPU
        # may run. Shared arrays keep theirs: if they need it here, this raises its refusal.
        unit = Unit(py_func, boundscheck, fastmath, error_model, lockstep_parameters=False)
        text = unit.generate()
    return Translation(text, unit.kernel_fn.name, unit.shape, unit.dynamic_shared)


def translate_stages(py_func, boundscheck: bool = False) -> dict[str, str]:
    """The kernel's body as text after each stage of the translator that it goes through
    (``emit/module.py``: ``STAGES``; a flat kernel has no ``scan_idiom`` or ``const_shapes``
    stage), ending with the generated module (``"module"``). For reading and bisecting: it
    honours ``NUMBA_CUBE_DISABLE_PASSES`` like every translation."""
    from numba_cube.backends.cpu.emit.module import Unit
    from numba_cube.backends.cpu.passes.lockstep.schedule import refuses_lockstep

    unit = Unit(py_func, boundscheck, record_stages=True)
    try:
        unit.generate()
    except CompileError as exc:
        if not refuses_lockstep(exc):
            raise
        # as ``translate`` does: lockstep through global memory given up where it cannot be kept
        unit = Unit(py_func, boundscheck, lockstep_parameters=False, record_stages=True)
        unit.generate()
    return dict(unit.stages)


def translate_source(py_func, boundscheck: bool = False, fastmath: bool | tuple = False,
                     error_model: str = "numpy") -> str:
    """Translate only: the generated module text (no file written, nothing imported)."""
    return translate(py_func, boundscheck, fastmath, error_model).source


def translation_options(boundscheck: bool, fastmath, error_model: str) -> tuple:
    """What decides a kernel's translation besides the kernel itself: the flags of its key
    (``cache/key.py``). The options asked for; the parallel variant's pieces, which are the
    host's thread count (``emit/entry_points.CHUNKS``); the optional passes switched off
    (``NUMBA_CUBE_DISABLE_PASSES``: another translation)."""
    from numba_cube.backends.cpu.emit.entry_points import CHUNKS

    options = (bool(boundscheck), fastmath, error_model, CHUNKS)
    switched_off = passes.disabled()
    if switched_off:
        options += (tuple(sorted(switched_off)),)
    return options


def build_program(py_func, boundscheck: bool = False, fastmath: bool | tuple = False,
                  error_model: str = "numpy", kernel_id: str | None = None,
                  block: tuple[int, int, int] | None = None) -> CpuProgram:
    """Translate ``py_func`` (a function in numba.cuda's dialect), cache and import the result.

    ``fastmath`` is ``njit``'s (True, or a tuple of LLVM flag names), given to every generated
    function, device functions included, as numba-cuda gives it to the whole NVVM module;
    ``error_model`` likewise (``"python"`` for ``debug=True`` kernels, as numba-cuda does).
    ``kernel_id`` (``Kernel.id``, where it is the same in every process: ``id_is_stable``) lets
    a translation kept on disk by an earlier process be used instead of translating again
    (``cache/key.py`` lists what else its key covers); without it the kernel is always translated.
    ``block``: the block shape every launch of the program will have. A cube kernel's module is
    then specialized for it (``emit/block_shape.py``: its dispatchers raise ``ValueError`` when
    called with another shape); a flat kernel's is the same module either way.
    Raises ``CompileError`` for kernels the translator refuses. Nothing is compiled by Numba yet:
    that happens on the first call or ``.compile(signature)`` of either dispatcher.
    """
    key = translation = None
    if kernel_id is not None:
        key = cachekey.translation_key(kernel_id, py_func,
                                       translation_options(boundscheck, fastmath, error_model))
    if key is not None:
        record = codecache.load_translation(key)
        translation = None if record is None else Translation.from_record(record)
    if translation is None:
        translation = translate(py_func, boundscheck, fastmath, error_model)
        if key is not None:
            codecache.store_translation(key, asdict(translation))
    name = translation.kernel_name
    source = translation.source
    if block is not None and translation.shape == "cube" and passes.enabled("block_shape"):
        from numba_cube.backends.cpu.emit.block_shape import for_block

        source = for_block(source, name, block)
    try:
        module = codecache.load_module(name, source)
    except SyntaxError as exc:                      # pragma: no cover - translator bug
        raise CompileError(f"internal error: generated code for {name!r} does not parse: {exc}",
                           construct="generated code") from exc
    return CpuProgram(
        source=source,
        parallel=getattr(module, f"{name}__par"),
        serial=getattr(module, f"{name}__ser"),
        kernel_name=name,
        module_name=module.__name__,
        path=module.__file__,
        shape=translation.shape,
        dynamic_shared=translation.dynamic_shared,
        bounds_sites=getattr(module, "__bounds_sites", ()),
        chunk=getattr(module, f"{name}__chunk"),
        parallel_status=getattr(module, f"{name}__par_status", None),
    )
