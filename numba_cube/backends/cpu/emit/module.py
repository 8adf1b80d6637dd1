"""Assemble the generated module for one kernel: header, imports, device functions, kernels.

The translation is the ``PIPELINE`` of named stages (``lower``, ``lockstep``, ``privatize``,
``shape``, ``shape_passes``, ``bounds``, ``region_passes``, ``module``), each a ``Unit`` method
that takes the ``KernelIR`` the stage before it left; ``python -m numba_cube translate --after STAGE`` prints the kernel's body after
one (``STAGES``), ``NUMBA_CUBE_DISABLE_PASSES`` switches optional passes off
(``passes/__init__.py``).

A ``Unit`` translates one kernel and, recursively, every device function it calls (all into the
same module, so that editing a device function changes the module's hash: Numba's cache does not
notice changes in *other* files). Each kernel is printed twice:

- ``<name>__par``: ``njit(parallel=True)``, ``prange`` over worker chunks;
- ``<name>__ser``: ``njit(parallel=False)``, the same work in one piece, for small launches
  (a small ``prange`` call can cost milliseconds of thread wake-up).

They are two functions rather than two dispatchers of one function because Numba's cache index is
keyed by function and signature, not by the ``parallel`` flag. Both call one ``<name>__chunk``
function that runs a contiguous piece of the launch, so the heavy body is compiled once and
Numba's parfor passes only see a one-line ``prange`` loop (which keeps compile times down; Numba
still re-optimises the linked body in each caller). Kernels that can raise get a
``<name>__guard`` wrapper around the chunk in the parallel variant (``emit/entry_points.py``).
Kernels with global arrays only ever added to atomically get their chunk printed as
``<name>__body``, taking per-chunk private copies, and a ``<name>__chunk`` that makes and merges
them (``passes/privatize.py``).

The kernel takes ``(__gdx, __gdy, __gdz, __bdx, __bdy, __bdz, *kernel_params)``, and a kernel that
declares dynamic shared memory the launch's size in bytes after the geometry
(``lower/dynamic_shared.py``, ``Unit.dynamic_shared``). Kernels with barriers or shared memory
use the cube-by-cube shape of ``emit/cube_kernel.py``; the others the flat shape of
``emit/flat_kernel.py``.

Device functions (``cuda.jit(device=True)`` and ``njit`` functions called from a kernel) become
``<name>__dev`` functions. Those that read thread/block ids get them as extra keyword parameters
(``__tx=__tx``), computed to a fixpoint over the call graph. Device functions with barriers or
``cuda.shared.array`` (the barrier has to split the *caller's* unit loop), or called with
compile-time arguments (functions, dtypes, shapes), are inlined into their caller instead
(``lower/inline/inliner.py``).
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numba
import numpy as np

from numba_cube.backends.cpu.passes.bounds import checks as bounds
from numba_cube.backends.cpu.passes import const_shapes as constshapes, privatize, scan_idiom
from numba_cube.backends.cpu.passes import shape_passes
from numba_cube.backends.cpu.passes.shared_stores import STORE_DIFFERS
from numba_cube.backends.cpu.passes.lockstep import schedule as lockstep
from numba_cube.backends.cpu.frontend import resolve as rs
from numba_cube.backends.cpu.analyze.dataflow import Purity, remat_definitions
from numba_cube.backends.cpu.emit.cube_kernel import CubeKernel
from numba_cube.backends.cpu.emit.flat_kernel import FlatKernel
from numba_cube.backends.cpu.emit import entry_points, privatized_chunk
from numba_cube.backends.cpu.frontend.source import SourceFunction, load_function
from numba_cube.backends.cpu.lower.hidden import (
    ACC_PREFIX, GRID_UNIFORM_IDS, HIDDEN_IDS, LINEAR_TID, NONNEG, UNIFORM_IDS, contains_barrier,
    contains_grid_sync,
)
from numba_cube.backends.cpu.lower.lowering import Lowered, Lowerer
from numba_cube.backends.cpu.analyze.plan import build_cube_plan
from numba_cube.backends.cpu.emit.unit_code import Writer
from numba_cube.kernel.signatures import declared_signatures

#: bump when the shape of generated code changes in a way the text would not show
TRANSLATOR_VERSION = 1

#: the folder of everything generated modules import at run time
KERNEL_RUNTIME = Path(__file__).parents[1] / "kernel_runtime"
#: digest of that folder's files, by name and content: part of every module's text, so editing
#: any of them (or adding one) invalidates the generated files and Numba's caches
SUPPORT_DIGEST = hashlib.sha256(b"".join(
    path.name.encode() + b"\0" + path.read_bytes() for path in sorted(KERNEL_RUNTIME.glob("*.py")))
).hexdigest()[:16]


#: The translator's stages, in order: ``Unit.generate`` runs ``Unit._<name>`` for each on one
#: ``KernelIR``. ``lower``: builtins and device functions; ``lockstep``: warp-synchronous
#: regions (``passes/lockstep/``); ``privatize``: global atomics (``passes/privatize.py``);
#: ``shape``: the flat or cube kernel and the analyses of it (for a cube kernel the scan idiom,
#: constant shapes and its plan); ``shape_passes``: the passes that decide its loops
#: (``passes/shape_passes.py``: ``FLAT_PASSES``, ``CUBE_PASSES``); ``bounds``: bounds checks
#: (``passes/bounds/``); ``region_passes``: the passes that decide about each region's code as
#: checked (``REGION_PASSES``); ``module``: the printed text, from the decisions.
PIPELINE = ("lower", "lockstep", "privatize", "shape", "shape_passes", "bounds",
            "region_passes", "module")

#: the points after which ``Unit.stages`` keeps the kernel's body as text (``record_stages``):
#: after the first three stages, inside ``shape`` for a cube kernel after the scan idiom and
#: the constant shapes, and the module itself
STAGES = ("lower", "lockstep", "privatize", "scan_idiom", "const_shapes", "module")


@dataclass
class KernelIR:
    """What goes from stage to stage (``PIPELINE``): the lowered kernel and the hidden ids it and
    its device functions need (``lower``), the flat or cube kernel the later stages decide
    about and print (``shape``), which keeps the record of those decisions (``shape_passes``,
    ``region_passes``), and the module's text (``module``)."""

    kernel: Lowered | None = None
    device_needs: dict = field(default_factory=dict)
    kernel_needs: set = field(default_factory=set)
    shape: object = None
    text: str = ""

    @property
    def decisions(self):
        """The passes' decisions about the shape (``passes/shape_passes.py``), once made."""
        return getattr(self.shape, "decisions", None)


class Unit:
    """Translation of one kernel (plus its device functions) into module text."""

    def __init__(self, py_func, boundscheck: bool = False, fastmath: bool | tuple = False,
                 error_model: str = "numpy", lockstep_parameters: bool = True,
                 record_stages: bool = False):
        if error_model not in ("numpy", "python"):
            raise ValueError(f"error_model must be 'numpy' or 'python', not {error_model!r}")
        self.boundscheck = bool(boundscheck)
        self.fastmath = fastmath      # njit's: True, or a tuple of LLVM fast-math flag names
        self.error_model = error_model
        #: whether array parameters (global memory) take part in lockstep
        #: (``passes/lockstep/schedule.py``), as shared arrays always do; ``translate`` turns it off
        #: where it cannot be applied
        self.lockstep_parameters = lockstep_parameters
        self.env = rs.ModuleEnv()
        # numba-cuda reports where a debug=True kernel raised (lower/raises.py)
        self.env.unit_positions_in_exceptions = error_model == "python"
        self.kernel_fn = load_function(py_func, "kernel")
        #: stage name -> the kernel's body as text after it (``STAGES``), when ``record_stages``:
        #: what ``python -m numba_cube translate --after STAGE`` prints
        self.stages: dict[str, str] | None = {} if record_stages else None
        self.devices: dict[int, tuple[str, SourceFunction, Lowered | None]] = {}
        self._pending: list[int] = []
        self.shape = ""          # "flat" or "cube" once generated
        #: whether the kernel takes the dynamic shared memory size after the geometry
        #: (``lower/dynamic_shared.py``), known once generated
        self.dynamic_shared = False
        #: global arrays whose atomics accumulate per chunk (``passes/privatize.py``), once
        #: generated
        self.privatized: privatize.Privatized | None = None

    # ---- device functions -----------------------------------------------------------------

    def register_device(self, obj, kind, node) -> str:
        py_func = obj.py_func
        key = id(py_func)
        if key not in self.devices:
            fn = load_function(py_func, "device function")
            declared = declared_signatures(obj)
            if declared is not None and not declared.converts_nothing():
                # numba-cuda casts a call's arguments to the declared signature; the generated
                # device function would be compiled for whatever types it is called with.
                raise self.kernel_fn.error(
                    f"device function {fn.name!r} was declared with signatures "
                    f"({', '.join(declared_signatures(obj).describe())}), whose argument "
                    "conversions the CPU backend does not reproduce; declare it without "
                    "signatures (cuda.jit(device=True)), or convert the arguments in the kernel",
                    "device function with declared signatures", node)
            taken = {alias for alias, _, _ in self.devices.values()}
            alias, k = f"{fn.name}__dev", 1
            while alias in taken:
                k += 1
                alias = f"{fn.name}__dev{k}"
            self.devices[key] = (alias, fn, None)
            self._pending.append(key)
        return self.devices[key][0]

    def _lower_devices(self) -> None:
        while self._pending:
            key = self._pending.pop()
            alias, fn, _ = self.devices[key]
            lowered = Lowerer(fn, self.env, self.register_device, "device").run()
            self.devices[key] = (alias, fn, lowered)

    def _device_needs(self) -> dict[int, list[str]]:
        """Hidden ids each device function needs, including those of its callees."""
        needs = {k: set(low.hidden_used) for k, (_, _, low) in self.devices.items()}
        changed = True
        while changed:
            changed = False
            for k, (_, _, low) in self.devices.items():
                for _, callee in low.device_calls:
                    extra = needs[id(callee.py_func)] - needs[k]
                    if extra:
                        needs[k] |= extra
                        changed = True
        return {k: [h for h in HIDDEN_IDS if h in v] for k, v in needs.items()}

    @staticmethod
    def _patch_calls(lowered: Lowered, needs) -> None:
        for call, callee in lowered.device_calls:
            call.keywords += [ast.keyword(h, ast.Name(h, ast.Load()))
                              for h in needs[id(callee.py_func)]]

    # ---- the whole module -----------------------------------------------------------------

    def _stage(self, name: str, body) -> None:
        if self.stages is not None:
            self.stages[name] = ast.unparse(ast.Module(list(body), []))

    def generate(self) -> str:
        """Run the ``PIPELINE``'s stages in order on one ``KernelIR``; the module's text."""
        ir = self.ir = KernelIR()       # kept: what the stages left (tests, dumps)
        for name in PIPELINE:
            getattr(self, f"_{name}")(ir)
        return ir.text

    def _lower(self, ir: "KernelIR") -> None:
        """numba.cuda builtins -> hidden names and helpers, device functions lowered (and
        inlined where they must be), each device function's hidden ids passed to it."""
        kernel = Lowerer(self.kernel_fn, self.env, self.register_device, "kernel").run()
        self._lower_devices()
        needs = self._device_needs()
        self._patch_calls(kernel, needs)
        for _, _, low in self.devices.values():
            self._patch_calls(low, needs)
        ir.kernel, ir.device_needs = kernel, needs
        ir.kernel_needs = set(kernel.hidden_used).union(
            *(needs[id(c.py_func)] for _, c in kernel.device_calls))
        self._stage("lower", kernel.body)

    def _lockstep(self, ir: "KernelIR") -> None:
        """Units that exchange values through memory inside a region run it in lockstep."""
        kernel = ir.kernel
        writes = {alias: lockstep.written_parameters(low.params, low.body)
                  for alias, _, low in self.devices.values()}
        exchanged = {d.name for d in kernel.shared}
        if self.lockstep_parameters:
            exchanged |= set(kernel.params)
        lockstep.insert_lockstep_points(kernel.body, exchanged, writes)
        self._stage("lockstep", kernel.body)

    def _privatize(self, ir: "KernelIR") -> None:
        """Before the shapes see the body: the private copies are parameters of the chunk body."""
        self.privatized = privatize.privatize(ir.kernel, self.env)
        if self.privatized:
            privatized_chunk.wrapper_imports(self.env)
        self._stage("privatize", ir.kernel.body)

    def _shape(self, ir: "KernelIR") -> None:
        """A kernel with barriers or shared memory becomes a cube kernel (its plan:
        ``cube_kernel.py``), any other a flat one."""
        kernel = ir.kernel
        purity = Purity(self.kernel_fn.local_names | set(kernel.params), self.env.objects)
        has_barrier = any(contains_barrier(s) for s in kernel.body)
        if has_barrier or kernel.shared:
            self.shape = "cube"
            ir.shape = self._cube_kernel(kernel, purity)
        else:
            self.shape = "flat"
            ir.shape = FlatKernel(kernel, purity, needs_tid=LINEAR_TID in ir.kernel_needs)

    def _shape_passes(self, ir: "KernelIR") -> None:
        """The passes that decide the shape's loops, in order (``shape_passes.decide_shape``)."""
        shape_passes.decide_shape(ir.shape)

    def _region_passes(self, ir: "KernelIR") -> None:
        """The passes that decide about each region's code as it will be printed, bounds checks
        included (``shape_passes.decide_regions``)."""
        shape_passes.decide_regions(ir.shape)

    def _bounds(self, ir: "KernelIR") -> None:
        """IndexErrors that name the array and the unit (``passes/bounds/checks.py``)."""
        if self.boundscheck:
            sites = bounds.add_checks(ir.shape)
            self.env.helpers[bounds.CHECKER] = bounds.import_line()
            self.env.constants.append(bounds.sites_line(sites))

    def _module(self, ir: "KernelIR") -> None:
        """Print the module: header and imports, device functions, the launchers."""
        w = Writer()
        self._header(w)
        for line in getattr(ir.shape, "imports", ()):      # helpers of warp exchanges and masks
            w.line(line)
        for key, (alias, fn, low) in self.devices.items():
            self._device(w, alias, fn, low, ir.device_needs[key])
        self._launchers(w, ir.shape, ir.kernel)
        # Numba's own check only where passes/bounds/checks.py's do not cover every access
        # (bounds.relax)
        ir.text = bounds.relax(w.text()) if self.boundscheck else w.text()
        if self.stages is not None:
            self.stages["module"] = ir.text

    def _launchers(self, w: Writer, shape, kernel: Lowered) -> None:
        """The chunk function and the two entry points that call it."""
        name = self.kernel_fn.name
        chunk = f"{name}__chunk"
        geometry = ["__gdx", "__gdy", "__gdz", "__bdx", "__bdy", "__bdz"]
        geometry += getattr(shape, "launch_params", [])     # the dynamic shared size, if used
        self.dynamic_shared = len(geometry) > 6
        params = self.privatized.entry_params if self.privatized else kernel.params
        args = ", ".join(geometry + list(params))
        if self.privatized:     # the body runs on private copies, a wrapper merges them
            shape.emit_chunk(w, f"{name}__body", self._decorator(None))
            privatized_chunk.emit_wrapper(w, chunk, f"{name}__body", geometry, self.privatized,
                                   self._decorator(None))
        else:
            shape.emit_chunk(w, chunk, self._decorator(None))
        may_raise = self._may_raise(kernel) or getattr(shape, "may_raise", False)  # run-time checks
        entry_points.emit(w, name, shape.work, args, may_raise, self._decorator)

    def _may_raise(self, kernel: Lowered) -> bool:
        """Can the kernel raise? (bounds checks, Python's error model -- a division by zero
        raises --, or a raise/assert in it or a device function)"""
        bodies = [kernel.body] + [low.body for _, _, low in self.devices.values()]
        return self.boundscheck or self.error_model == "python" or any(isinstance(n, (ast.Raise, ast.Assert))
                                       for body in bodies for s in body for n in ast.walk(s))

    def _cube_kernel(self, kernel: Lowered, purity: Purity) -> CubeKernel:
        # the syncthreads_count/and/or counters are cube-level by construction
        counters = {n.id for s in kernel.body for n in ast.walk(s)
                    if isinstance(n, ast.Name) and n.id.startswith(ACC_PREFIX)}
        # with a grid sync the cube loop moves inside every region (fission's grid mode), so
        # what runs between regions runs once per grid: block ids are not uniform there
        grid = contains_grid_sync(kernel.body)
        seed = (set(GRID_UNIFORM_IDS) if grid else set(UNIFORM_IDS)) | set(kernel.params) \
            | counters
        if not grid:            # a grid sync keeps every cube's state: no cube-level shortcut
            kernel.body = scan_idiom.rewrite(kernel.body, kernel.params, kernel.shared, purity,
                                             self.env)
        self._stage("scan_idiom", kernel.body)
        # sm.size, len(sm) of shared/local arrays are constants: uniform loop bounds
        constshapes.fold_uniform_shapes(kernel.body, constshapes.constant_shapes(kernel), seed,
                                        purity)
        self._stage("const_shapes", kernel.body)
        plan = build_cube_plan(self.kernel_fn, kernel.body, seed, purity, grid)
        invariant = set(HIDDEN_IDS) | set(kernel.params)
        remat = remat_definitions(kernel.body, invariant, purity)
        return CubeKernel(kernel, plan, remat, purity)

    def _decorator(self, parallel: bool | None) -> str:
        opts = [] if parallel is None else [f"parallel={parallel}"]
        opts += ["nogil=True", "cache=True", f"boundscheck={self.boundscheck}",
                 f"error_model={self.error_model!r}"]
        if self.fastmath:   # only when asked: the text of every other module stays as it was
            # A set literal in sorted order: a set's own repr varies with hash randomisation.
            flags = "True" if self.fastmath is True else "{%s}" % ", ".join(
                map(repr, sorted(self.fastmath)))
            opts.append(f"fastmath={flags}")
        return f"@__njit({', '.join(opts)})"

    def _header(self, w: Writer) -> None:
        fn = self.kernel_fn
        w.line("# Generated by numba_cube's CPU translator (loop fission). Do not edit: the file")
        w.line("# name is the SHA-256 of this text, and a file whose content does not match is")
        w.line("# regenerated.")
        w.line(f"# kernel: {fn.py_func.__module__}.{fn.py_func.__qualname__} "
               f"({fn.filename}, line {fn.user_line(fn.node)})")
        w.line(f"# translator {TRANSLATOR_VERSION}, support {SUPPORT_DIGEST}, "
               f"numba {numba.__version__}, numpy {np.__version__}, "
               f"boundscheck={self.boundscheck}")
        w.line("import numpy as __np")
        w.line("from numba import njit as __njit, prange as __prange")
        w.line(f"from numba_cube.backends.cpu.kernel_runtime.support import assume_nonneg as {NONNEG}, "
               "bound_lt as __bound_lt, bound_le as __bound_le, bound_gt as __bound_gt, "
               f"bound_ge as __bound_ge, replica as __replica, store_differs as {STORE_DIFFERS}")
        for line in sorted(self.env.helpers.values()):
            w.line(line)
        for line in self.env.header:
            w.line(line)
        for line in self.env.constants:
            w.line(line)
        w.line()

    def _device(self, w: Writer, alias, fn: SourceFunction, low: Lowered, hidden) -> None:
        defaults = fn.py_func.__defaults__ or ()
        params = list(low.params)
        first_default = len(params) - len(defaults)
        for i, value in enumerate(defaults):
            try:
                params[first_default + i] += "=" + ast.unparse(rs.literal(value))
            except rs.Unsupported:
                raise fn.error(f"default value of parameter {params[first_default + i]!r} "
                               "must be a constant", "non-constant default", fn.node) from None
        params += [f"{h}=0" if defaults else h for h in hidden]
        w.line(self._decorator(None))
        with w.indent(f"def {alias}({', '.join(params)}):"):
            w.code(low.body, fn)
        w.line()
