"""Every public name of numba.cuda is classified exactly once (``numba_cube/dropin/exports.py``):
served by the layer, kept as numba-cuda made it, or refused with a typed error naming it."""

from __future__ import annotations

import pytest

import numba_cube as cube
from numba_cube.dropin import exports


def test_every_public_name_of_numba_cuda_is_in_exactly_one_class():
    """A walk of ``dir(numba.cuda)`` (numba-cuda's own objects, the layer not installed): each
    public name is served, kept or refused, never two of them, never none."""
    import numba.cuda as cuda_module

    assert cube.dropin.installed_device() is None
    wrong = {}
    for name in dir(cuda_module):
        if name.startswith("_"):
            continue
        classes = exports.classify(name, getattr(cuda_module, name))
        if len(classes) != 1:
            wrong[name] = classes
    assert wrong == {}
    public = set(dir(cuda_module))
    assert set(exports.SERVED) <= public and set(exports.REFUSED) <= public


def test_installed_names_are_the_layers_and_refusals_name_the_api(layer):
    """Installed, a served name is the layer's object, a refused one raises UnsupportedAPIError
    (a NotImplementedError) naming ``numba.cuda.<name>``, a kept one is numba-cuda's."""
    from numba.cuda import stubs

    for name, room in exports.SERVED.items():
        assert getattr(layer, name).__module__.startswith("numba_cube.dropin"), name
    for name in exports.REFUSED:
        with pytest.raises(cube.UnsupportedAPIError, match=f"numba.cuda.{name}") as info:
            getattr(layer, name)()
        assert isinstance(info.value, NotImplementedError)
        assert info.value.api == f"numba.cuda.{name}"
    assert issubclass(layer.threadIdx, stubs.Stub)
