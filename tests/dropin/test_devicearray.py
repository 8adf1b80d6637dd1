"""numba.cuda's ``DeviceNDArray`` over a handle (``numba_cube/dropin/devicearray.py``): numba's
semantics, checked against NumPy (what the same operation on the host array gives) and, for the
subtle ones, against numba-cuda's simulator running the same program."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import numba_cube as cube


def test_descriptors_are_the_host_arrays(layer):
    """shape, strides, dtype, size, nbytes, ndim, len and the contiguity flags are NumPy's for
    the array copied in (an F-ordered array stays F-ordered)."""
    for host in (np.arange(12.0).reshape(3, 4), np.asfortranarray(np.arange(6, dtype=np.int32)
                                                                  .reshape(2, 3))):
        d = layer.to_device(host)
        assert (d.shape, d.strides, d.dtype, d.size, d.nbytes, d.ndim, len(d)) == \
            (host.shape, host.strides, host.dtype, host.size, host.nbytes, host.ndim, len(host))
        assert d.is_c_contiguous() == host.flags.c_contiguous
        assert d.is_f_contiguous() == host.flags.f_contiguous
        got = d.copy_to_host()
        assert np.array_equal(got, host) and got.strides == host.strides


def test_a_device_array_is_a_handle_a_client_takes(layer):
    """A program mixing the layer and numba_cube's client shares the buffer: the client reads the
    device array, and as_cuda_array makes a device array of a client's handle, without a copy."""
    d = layer.to_device(np.arange(5.0))
    client = cube.client("cpu")
    assert isinstance(d, cube.Handle) and np.array_equal(client.read(d), np.arange(5.0))
    h = client.create(np.zeros(3))
    view = layer.as_cuda_array(h)
    view[1] = 7.0
    assert list(client.read(h)) == [0.0, 7.0, 0.0]

    @cube.kernel
    def add_one(a):
        i = layer.grid(1)
        if i < a.size:
            a[i] += 1

    client.launch(add_one, 1, 8, d)            # a cube kernel on the layer's device array
    assert np.array_equal(d.copy_to_host(), np.arange(5.0) + 1)


def test_scalar_indexing_reads_a_numpy_scalar_and_slices_are_views(layer):
    """An int per axis reads a NumPy scalar; any other basic index is a device array view whose
    writes land in the original (a bare int drops its axis, as in NumPy)."""
    host = np.arange(24, dtype=np.int64).reshape(2, 3, 4)
    d = layer.to_device(host)
    assert d[1, 2, 3] == host[1, 2, 3] and type(d[1, 2, 3]) is np.int64
    assert d[-1, 0, -2] == host[-1, 0, -2]
    for key in (1, (slice(None), 1), (Ellipsis, 2), (0, slice(None, None, 2)),
                (slice(None), None, 1)):
        view = d[key]
        assert isinstance(view, type(d)) and np.array_equal(view.copy_to_host(), host[key]), key
    d[0][1] = -1           # a write through a view reaches the array
    assert d[0, 1, 3] == -1
    with pytest.raises(IndexError):
        d[2, 0, 0]
    with pytest.raises(NotImplementedError, match="negative strides"):
        d[0, ::-1].copy_to_host()       # numba refuses this copy too


def test_setitem_broadcasts_as_numba_assigns(layer):
    """``d[key] = value`` writes scalars, host arrays and device arrays, broadcast over the
    view; a shape that does not broadcast is numba's ValueError."""
    host = np.zeros((3, 4))
    d = layer.to_device(host)
    d[0] = 5
    host[0] = 5
    d[:, 1] = np.array([1.0, 2.0, 3.0])
    host[:, 1] = [1.0, 2.0, 3.0]
    d[2, 3] = 9.5
    host[2, 3] = 9.5
    d[1:, 2:] = layer.to_device(np.array([7.0, 8.0]))
    host[1:, 2:] = [7.0, 8.0]
    d[:] = d.copy_to_host() * 2
    host[:] = host * 2
    assert np.array_equal(d.copy_to_host(), host)
    with pytest.raises(ValueError, match="Can't copy sequence"):
        d[0] = np.ones(3)


def test_views_reshape_ravel_squeeze_split_view(layer):
    """reshape/ravel/squeeze/split/view are views as NumPy's; a reshape or ravel that would need
    a copy is numba's NotImplementedError."""
    host = np.arange(12, dtype=np.int32)
    d = layer.to_device(host)
    assert np.array_equal(d.reshape(3, 4).copy_to_host(), host.reshape(3, 4))
    assert np.array_equal(d.reshape((2, -1), order="F").copy_to_host(),
                          host.reshape((2, -1), order="F"))
    assert np.array_equal(d.reshape(3, 4).ravel().copy_to_host(), host)
    assert d.reshape(1, 12, 1).squeeze().shape == (12,)
    assert [p.copy_to_host().tolist() for p in d.split(5)] == \
        [host[:5].tolist(), host[5:10].tolist(), host[10:].tolist()]
    assert np.array_equal(d.view(np.float32).copy_to_host(), host.view(np.float32))
    assert np.array_equal(d.view(np.int16).copy_to_host(), host.view(np.int16))
    strided = d.reshape(3, 4)[:, ::2]
    with pytest.raises(NotImplementedError, match="copying"):
        strided.reshape(6)
    with pytest.raises(NotImplementedError):
        strided.ravel()


def test_transpose_is_a_copy_as_numbas_kernel_makes(layer):
    """``T`` of a 2-D array is a new C-contiguous array with the transposed contents (numba's
    transpose kernel copies); writing it leaves the original alone; 1-D arrays are refused."""
    host = np.arange(6.0).reshape(2, 3)
    d = layer.to_device(host)
    t = d.T
    assert t.shape == (3, 2) and t.is_c_contiguous()
    assert np.array_equal(t.copy_to_host(), host.T)
    t[0, 0] = 100.0
    assert d[0, 0] == 0.0
    with pytest.raises(NotImplementedError):
        layer.to_device(np.arange(3.0)).T


def test_copy_to_host_into_an_array_and_copy_to_device(layer):
    """``copy_to_host(ary)`` fills and returns ``ary``; a wrong dtype is numba's TypeError, a
    wrong shape its ValueError; ``copy_to_device`` takes host and device arrays."""
    d = layer.device_array((2, 3), np.float64)
    d.copy_to_device(np.full((2, 3), 4.0))
    out = np.empty((2, 3))
    assert d.copy_to_host(out) is out and (out == 4.0).all()
    with pytest.raises(TypeError):
        d.copy_to_host(np.empty((2, 3), np.float32))
    with pytest.raises(ValueError):
        d.copy_to_host(np.empty((3, 2)))
    other = layer.to_device(np.arange(6.0).reshape(2, 3))
    d.copy_to_device(other)
    assert np.array_equal(np.asarray(d), np.arange(6.0).reshape(2, 3))


def test_no_cuda_array_interface_on_host_memory(layer):
    """The CPU backend's memory is host memory: no ``__cuda_array_interface__`` (hasattr is
    False), as for a NumPy array; ``is_cuda_array`` is still True (it is device memory to the
    layer)."""
    d = layer.to_device(np.ones(3))
    assert not hasattr(d, "__cuda_array_interface__")
    assert layer.is_cuda_array(d) and not layer.is_cuda_array(np.ones(3))


_PROGRAM = r"""
import json
import numpy as np
from numba import cuda
out = {}
h = np.arange(24, dtype=np.float64).reshape(4, 6)
d = cuda.to_device(h)
out["scalar"] = float(d[2, 3])
out["row"] = d[1].copy_to_host().tolist()
out["col"] = d[:, 2].copy_to_host().tolist()
d[0] = 1.5
d[1, :3] = np.array([7, 8, 9])
d[2:, 4:] = 0
out["after_set"] = d.copy_to_host().tolist()
out["reshape"] = d.reshape(6, 4).copy_to_host().tolist()
out["ravel"] = d.ravel().copy_to_host().tolist()
out["T"] = d.T.copy_to_host().tolist()
out["split"] = [p.copy_to_host().tolist() for p in d.ravel().split(10)]
out["view"] = d.view(np.int64)[0].copy_to_host().tolist()
f = cuda.to_device(np.asfortranarray(h))
out["f"] = [f.is_f_contiguous(), f.is_c_contiguous(), f.copy_to_host().flags.f_contiguous]
out["like"] = cuda.device_array_like(f).is_f_contiguous()
print(json.dumps(out))
"""


def test_the_same_program_gives_the_simulators_results(tmp_path):
    """A program of device array operations prints the same under numba-cuda's simulator (the
    reference) and under ``python -m numba_cube run``."""
    script = tmp_path / "prog.py"
    script.write_text(_PROGRAM)
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    ref = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                         timeout=300)
    assert ref.returncode == 0, ref.stderr
    env.pop("NUMBA_ENABLE_CUDASIM")
    ours = subprocess.run([sys.executable, "-m", "numba_cube", "run", str(script)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert ours.returncode == 0, ours.stderr
    assert json.loads(ours.stdout) == json.loads(ref.stdout)
