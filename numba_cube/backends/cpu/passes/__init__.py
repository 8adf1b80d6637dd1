"""Passes: each decides one thing about a kernel (a check to add, a loop to reorder, a region
to run in lockstep, an idiom to replace) from the lowered body and the analyses.

A pass never prints the module; the emitters (``emit/``) read its decisions and print them
(``emit/privatized_chunk.py``, ``emit/interchanged_region.py``, ``emit/mask_spans.py``, ...);
``tests/test_layering.py`` holds that no pass imports an emitter.

**Optional passes.** Most passes only make a kernel faster: with one of them off, the kernel
computes the same, in a slower form. Those are listed in ``OPTIONAL_PASSES`` and can be switched
off by name, ``NUMBA_CUBE_DISABLE_PASSES=interior,spans`` (or ``all``): a wrong answer can then
be bisected to a pass. Each such pass asks ``enabled(name)`` where it decides, and decides
nothing when off. ``tests/backends/cpu/passes/test_optional_passes.py`` runs a corpus of kernels
with each one off against NumPy. The set switched off is part of a translation's key
(``translate.build_program``), so a translation kept on disk by a process with other settings is
never reused. The passes that keep a kernel correct (``lockstep/``, ``const_shapes.py``, which
decides what is uniform) and the bounds checks (a client option) are not optional.
"""

from __future__ import annotations

from numba_cube import config

__all__ = ["OPTIONAL_PASSES", "enabled", "disabled"]

#: name -> what switching it off gives up (the module that decides it)
OPTIONAL_PASSES = {
    "privatize": "global atomics accumulated in private copies per chunk (privatize.py)",
    "scan_idiom": "a cube's Hillis-Steele scan rounds run by one unit in one pass (scan_idiom.py)",
    "guards": "a region that is one guarded if loops only over the units it admits (guards.py)",
    "interior": "cubes wholly inside their guards run without the tests (interior.py)",
    "spans": "masks that are a prefix or suffix of the cube found by search (spans.py)",
    "stride_interchange": "a region's grid-stride loop run row by row across units "
                          "(stride_interchange.py)",
    "demanded_lanes": "shuffle rounds compute only the lanes read afterwards (demanded_lanes.py)",
    "loop_order": "the inner unit loop walks the coordinate the subscripts favour, along rows "
                  "(loop_order.py)",
    "uniform_prologue": "a barrier-free kernel's grid-uniform prologue runs once per chunk "
                        "(uniform_prologue.py)",
    "shared_stores": "a store every unit makes to one element is made only when it changes the "
                     "element (shared_stores.py)",
    "block_shape": "a cube kernel compiled for the block shape of its launch "
                   "(emit/block_shape.py)",
}

_VARIABLE = "NUMBA_CUBE_DISABLE_PASSES"


def disabled() -> frozenset:
    """The optional passes switched off by ``NUMBA_CUBE_DISABLE_PASSES`` (read at each call, so a
    process or a test may change it). ``all`` switches every one off. An unknown name raises
    ``ValueError`` naming the known ones: a misspelt name must not leave the pass on silently."""
    text = config.get_str(_VARIABLE) or ""
    names = {n.strip() for n in text.split(",") if n.strip()}
    if "all" in names:
        return frozenset(OPTIONAL_PASSES)
    unknown = names - set(OPTIONAL_PASSES)
    if unknown:
        raise ValueError(f"{_VARIABLE}: unknown pass(es) {', '.join(sorted(unknown))}; the "
                         f"optional passes are {', '.join(OPTIONAL_PASSES)} (or 'all')")
    return frozenset(names)


def enabled(name: str) -> bool:
    """Does the optional pass ``name`` run (``NUMBA_CUBE_DISABLE_PASSES`` does not name it)?"""
    if name not in OPTIONAL_PASSES:
        raise KeyError(f"{name!r} is not an optional pass")
    return name not in disabled()
