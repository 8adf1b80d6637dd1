"""Helpers of the dialect tests: one kernel that uses every scalar type of a CUDA dialect as a
shared and a local array dtype and as a cast, written as a real source file, and NumPy's values
for it."""

from __future__ import annotations

import importlib.util
import sys

import numpy as np

import numba_cube as cube


def write_kernel(tmp_path, module_name: str, import_line: str, names: list[str]):
    """A module (real source) with one kernel that, for the k-th type name, declares a shared
    and a local array of ``cuda.<name>`` by keyword and positionally, stores ``cuda.<name>(x[t])``
    in both and writes what they hold to ``out[k, t]`` and ``out[k, 4 + t]``."""
    lines = ["t = cuda.threadIdx.x"]
    for k, name in enumerate(names):
        lines += [f"s{k} = cuda.shared.array(shape=4, dtype=cuda.{name})",
                  f"l{k} = cuda.local.array(2, cuda.{name})",
                  f"s{k}[t] = cuda.{name}(x[t])",
                  f"l{k}[1] = cuda.{name}(x[t])"]
    lines.append("cuda.syncthreads()")
    for k in range(len(names)):
        lines += [f"out[{k}, t] = s{k}[3 - t]", f"out[{k}, 4 + t] = l{k}[1]"]
    source = f"{import_line}\n\n\ndef every_type(x, out):\n" + "".join(
        f"    {line}\n" for line in lines)
    path = tmp_path / f"{module_name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(module_name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = mod
    spec.loader.exec_module(mod)
    return mod.every_type


def expected_values(dtypes: list[np.dtype], x: np.ndarray) -> np.ndarray:
    """What NumPy makes of ``x`` converted to each dtype, as complex128 (the out array)."""
    rows = []
    for dt in dtypes:
        converted = x.astype(dt).astype(np.complex128)
        rows.append(np.concatenate([converted[::-1], converted]))
    return np.array(rows)


def run_every_type(kernel, n_types: int, x: np.ndarray) -> np.ndarray:
    with cube.stream():
        client = cube.client("cpu")
        out = client.create(np.zeros((n_types, 8), np.complex128))
        client.launch(cube.kernel(kernel), 1, 4, client.create(x), out)
        return client.read(out)
