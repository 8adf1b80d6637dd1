"""Streams and events under the layer (``numba_cube/dropin/streams.py``): a user stream's work
runs in issue order, events order streams and time what ran between two records, and a bad
stream argument is refused. The reference for the program-level semantics is numba-cuda's
simulator running the same program."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import numba_cube as cube

_PROGRAM = r"""
import json
import numpy as np
from numba import cuda

@cuda.jit
def add(a, v):
    i = cuda.grid(1)
    if i < a.size:
        a[i] = a[i] * 2 + v

@cuda.jit
def copy(src, dst):
    i = cuda.grid(1)
    if i < dst.size:
        dst[i] = src[i]

s1, s2 = cuda.stream(), cuda.stream()
a = cuda.to_device(np.zeros(256), stream=s1)
b = cuda.device_array(256, stream=s2)
for v in range(1, 6):                   # in issue order on s1: ((((0*2+1)*2+2)*2+3)...)
    add[2, 128, s1](a, v)
done = cuda.event()
done.record(s1)
done.wait(s2)
copy[2, 128, s2](a, b)
end = cuda.event()
end.record(s2)
end.synchronize()
out = {"b": b.copy_to_host(stream=s2)[:3].tolist()}   # (the simulator's times are dummies)
with s1.auto_synchronize():
    add[2, 128, s1](a, 0)
out["a"] = a.copy_to_host()[:2].tolist()
cuda.synchronize()
print(json.dumps(out))
"""


def test_streams_and_events_give_the_simulators_results(tmp_path):
    """Five launches on one stream run in issue order, an event orders a second stream's copy
    after them, and the results equal numba-cuda's simulator's for the same program."""
    script = tmp_path / "streams.py"
    script.write_text(_PROGRAM)
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    ref = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                         timeout=300)
    assert ref.returncode == 0, ref.stderr
    env.pop("NUMBA_ENABLE_CUDASIM")
    ours = subprocess.run([sys.executable, "-m", "numba_cube", "run", str(script)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert ours.returncode == 0, ours.stderr
    ours_out, ref_out = json.loads(ours.stdout), json.loads(ref.stdout)
    assert ours_out == ref_out and ours_out["b"] == [57.0] * 3


def test_a_user_stream_is_one_numba_cube_stream(layer):
    """``cuda.stream()`` names a fresh numba_cube stream; the default streams are the usual one."""
    s = layer.stream()
    assert isinstance(s.stream_id, cube.StreamId) and s
    assert layer.stream().stream_id != s.stream_id
    for default in (layer.default_stream(), layer.legacy_default_stream(),
                    layer.per_thread_default_stream()):
        assert default.stream_id is None and not default


def test_elapsed_time_measures_between_records(layer):
    """``elapsed_time`` is in milliseconds and grows with the work recorded between events; an
    event never recorded is a ValueError."""
    import time

    start, end = layer.event(), layer.event()
    start.record()
    time.sleep(0.02)
    end.record()
    assert start.elapsed_time(end) >= 20.0 * 0.9
    with pytest.raises(ValueError):
        start.elapsed_time(layer.event())


def test_a_stream_argument_that_is_no_stream_is_refused(layer):
    """A launch or copy on something that is not a stream of the layer is a StreamIdError (a
    TypeError) before anything runs."""

    @layer.jit
    def k(a):
        a[0] = 1

    with pytest.raises(cube.StreamIdError):
        k[1, 1, "stream"](layer.device_array(1))
    with pytest.raises(TypeError):
        layer.to_device(np.ones(2), stream=object())
    with pytest.raises(cube.UnsupportedAPIError):
        layer.external_stream(0)


def test_a_mixed_program_is_ordered_by_the_buffers_it_shares(layer):
    """numba_cube's own client writes a device array on one numba_cube stream, a layer kernel on a
    user stream reads it: the read sees the write (inferred dependency), with no event or sync in
    between, and the layer's copy to the host sees the kernel's result."""

    @cube.kernel
    def fill(a, v):
        i = layer.grid(1)
        if i < a.size:
            a[i] = v

    @layer.jit
    def double_into(src, dst):
        i = layer.grid(1)
        if i < dst.size:
            dst[i] = 2 * src[i]

    src, dst = layer.device_array(4096), layer.device_array(4096)
    double_into[16, 256](src, dst)                  # (the first launch waits for itself)
    writer = cube.client("cpu").set_stream(cube.StreamId.new())
    s = layer.stream()
    for v in (1.0, 2.0, 3.0):
        writer.launch(fill, 16, 256, src, v)
        double_into[16, 256, s](src, dst)
    assert np.array_equal(dst.copy_to_host(), np.full(4096, 6.0))
