"""The key of a cached translation: the same kernel in the same place gets the same key, and
everything the generated text depends on beyond the kernel id changes it."""

import textwrap

from numba_cube.backends.cpu.cache import key as cachekey

KERNEL = textwrap.dedent("""
    from numba import cuda

    @cuda.jit(device=True)
    def dev(x):
        return x + 1.0

    def fill(a):
        i = cuda.grid(1)
        if i < a.size:
            a[i] = dev(a[i])
""")


def load(filename, kernel_shift=0, device_shift=0):
    """The kernel ``fill`` of KERNEL compiled as ``filename``, with blank lines inserted above
    the device function (moving both) or above the kernel only."""
    source = "\n" * device_shift + KERNEL.replace("def fill", "\n" * kernel_shift + "def fill")
    namespace = {"__name__": "cachekey_case"}
    exec(compile(source, filename, "exec"), namespace)
    return namespace["fill"]


FLAGS = (False, False, "numpy")


def test_same_kernel_same_place_same_key():
    """Two loads of one kernel from one file at the same lines give one key, so a later process
    finds the translation an earlier one stored."""
    first = cachekey.translation_key("fill-0", load("k.py"), FLAGS)
    assert cachekey.translation_key("fill-0", load("k.py"), FLAGS) == first


def test_id_flags_file_and_lines_are_in_the_key():
    """The kernel id and the compile flags are in the key, and so are the places the generated
    text names but the id leaves out: the kernel's file and line, and a device function's line."""
    base = cachekey.translation_key("fill-0", load("k.py"), FLAGS)
    others = [
        cachekey.translation_key("fill-1", load("k.py"), FLAGS),
        cachekey.translation_key("fill-0", load("k.py"), (True, False, "numpy")),
        cachekey.translation_key("fill-0", load("k.py"), (False, ("nnan",), "numpy")),
        cachekey.translation_key("fill-0", load("k.py"), (False, False, "python")),
        cachekey.translation_key("fill-0", load("other.py"), FLAGS),
        cachekey.translation_key("fill-0", load("k.py", kernel_shift=2), FLAGS),
        cachekey.translation_key("fill-0", load("k.py", device_shift=2), FLAGS),
    ]
    assert len({base, *others}) == len(others) + 1


def test_positions_reach_device_functions():
    """``source_positions`` lists the kernel and the device function it calls (by its Python
    function), with the line each starts on; library functions are left out."""
    positions = cachekey.source_positions(load("k.py", device_shift=3))
    by_name = {qualname: (filename, line) for filename, line, qualname, _ in positions}
    assert set(by_name) == {"fill", "dev"}
    assert by_name["dev"] == ("k.py", 4 + 3)     # its decorator's line, as Python counts
    assert by_name["fill"][0] == "k.py"


def test_translator_digest_is_stable():
    """The translator's digest is the same on every call (it is read once per process)."""
    assert cachekey.translator_digest() == cachekey.translator_digest()
    assert len(cachekey.translator_digest()) == 64
