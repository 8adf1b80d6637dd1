"""The server of a CUDA device: the runtime's policy server over the CUDA mechanism.

``make_gpu_server`` is all there is to it: a ``DeviceServer`` (``runtime/server.py``: the launch
policy of every backend) holding a ``CudaMechanism`` (``mechanism.py``: what the policy asks of a
GPU), with an ``InlineChannel``: server operations run on the issuing thread under the device
lock, since a launch is a ~4 us asynchronous driver call and a hop to a device thread would cost
more than that. Tests build the same over the fake driver (``tests/cuda/cases/_cuda_fake.py``).
"""

from __future__ import annotations

from numba_cube.runtime.streams.channel import InlineChannel
from numba_cube.runtime.server import DeviceServer
from numba_cube.backends.cuda.mechanism import CudaMechanism

__all__ = ["make_gpu_server"]


def make_gpu_server(index: int, name: str = "cuda", *, driver=None, compiler=None,
                    baseline_rule: bool | None = None) -> DeviceServer:
    """The server of device ``<name>:<index>``: on the real GPU, unless a ``driver`` (and a
    ``compiler``) stand in for it."""
    mechanism = CudaMechanism(index, driver=driver, compiler=compiler, name=name)
    return DeviceServer(mechanism.device, mechanism, InlineChannel(mechanism.device),
                        baseline_rule=baseline_rule)
