"""numba.cuda's devices and contexts under the layer (``numba_cube/dropin/devices.py``): one
device named after the numba_cube device, CUDA's launch limits, host memory figures."""

from __future__ import annotations

import os


def test_one_device_with_cudas_limits(layer, capsys):
    """``gpus`` holds one device (a context manager), ``get_current_device`` is it, with a
    plausible compute capability and CUDA's limits; ``detect`` prints it and is True."""
    assert len(layer.gpus) == 1 and list(layer.gpus) == [layer.gpus[0]]
    with layer.gpus[0] as dev:
        assert dev is layer.get_current_device() is layer.select_device(0)
    assert dev.name == "numba_cube cpu:0" and dev.id == 0
    assert dev.compute_capability >= (6, 0)
    assert (dev.MAX_THREADS_PER_BLOCK, dev.WARP_SIZE, dev.MAX_GRID_DIM_Y) == (1024, 32, 65535)
    assert layer.is_available() and layer.detect()
    assert "numba_cube cpu:0" in capsys.readouterr().out


def test_memory_info_is_the_hosts(layer):
    """``current_context().get_memory_info()`` is (free, total) bytes of host memory."""
    free, total = layer.current_context().get_memory_info()
    assert 0 < free <= total == os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
