"""numba.cuda's memory API under the layer (``numba_cube/dropin/memory.py``): ``to_device``
(``stream=``, ``copy=``, ``to=``), ``device_array(_like)``, pinned, mapped and managed arrays
(host memory a launch copies in and back), ``as_cuda_array`` and ``is_cuda_array``; layouts and
refusals as numba's. Reference: NumPy."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda      # the module the layer is installed on (looked up at call time)

import numba_cube as cube


def test_to_device_copies_keeps_layout_and_takes_to(layer):
    """A copy of the host array (later host writes do not reach it); F order kept; broadcast
    arrays keep their stride-0 axes over one copy; ``to=`` copies into that array; a device
    array is returned as it is."""
    host = np.arange(6.0).reshape(2, 3)
    d = layer.to_device(host, stream=layer.stream())
    host[0, 0] = 99
    assert d[0, 0] == 0.0
    f = layer.to_device(np.asfortranarray(host))
    assert f.is_f_contiguous() and np.array_equal(f.copy_to_host(), host)
    b = layer.to_device(np.broadcast_to(np.arange(3.0), (4, 3)))
    assert b.strides == (0, 8) and np.array_equal(b.copy_to_host(), np.tile(np.arange(3.0), (4, 1)))
    target = layer.device_array((2, 3))
    assert layer.to_device(host, to=target) is target
    assert np.array_equal(target.copy_to_host(), host)
    assert layer.to_device(d) is d
    assert layer.to_device(host, copy=False).shape == (2, 3)


def test_a_host_array_with_no_contiguous_core_is_numbas_value_error(layer):
    """``to_device(a[:, ::2])`` is refused with numba's words (it would be copied as it lies)."""
    with pytest.raises(ValueError, match="non-contiguous"):
        layer.to_device(np.zeros((4, 4))[:, ::2])


def test_device_array_like_and_strides(layer):
    """``device_array_like`` of an F-only array is F-ordered; explicit non-contiguous strides
    are an UnsupportedAPIError naming them."""
    like = layer.device_array_like(np.asfortranarray(np.zeros((3, 2), np.float32)))
    assert like.is_f_contiguous() and not like.is_c_contiguous() and like.dtype == np.float32
    assert layer.device_array((2, 2), strides=(16, 8)).shape == (2, 2)
    with pytest.raises(cube.UnsupportedAPIError, match="strides"):
        layer.device_array((2, 2), strides=(32, 8))


def test_pinned_mapped_managed_arrays_are_host_arrays_a_launch_updates(layer):
    """Pinned, mapped and managed arrays are NumPy arrays; what a kernel writes into one is in it
    when the launch returns (numba's mapped memory: after a synchronize)."""

    @cuda.jit
    def fill(a, v):
        i = cuda.grid(1)
        if i < a.size:
            a[i] = v

    for make in (layer.pinned_array, layer.mapped_array, layer.managed_array):
        a = make(8, np.float64)
        assert type(a) is np.ndarray
        fill[1, 8](a, 3.0)
        assert (a == 3.0).all()
    with layer.mapped(np.zeros(4)) as m:
        fill[1, 4](m, 2.0)
        assert (m == 2.0).all()


def test_as_cuda_array_and_is_cuda_array(layer):
    """``as_cuda_array`` of a device array is itself, of a client's handle a view of the same
    memory, of a host array numba's TypeError; ``from_cuda_array_interface`` is refused."""
    d = layer.to_device(np.ones(3))
    assert layer.as_cuda_array(d) is d and layer.is_cuda_array(d)
    with pytest.raises(TypeError, match="cuda array interface"):
        layer.as_cuda_array(np.ones(3))
    with pytest.raises(cube.UnsupportedAPIError):
        layer.from_cuda_array_interface({})
