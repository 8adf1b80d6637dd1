"""The inner unit loop of a barrier-free kernel walks the axis its subscripts make contiguous.

``loop_order.inner_axis`` is pinned on parsed kernel bodies (numba's ``i, j = cuda.grid(2)`` then
``dst[i, j]`` walks ``y`` innermost; ``dst[j, i]``, 1-D kernels and ties keep ``x``), and kernels
whose loops are swapped run through ``build_program``'s serial and parallel variants against
NumPy: a 2-D stencil on a grid with partial cubes in both axes, guards hoisted on either
coordinate, the linear thread id (``cuda.laneid``) and a 3-D cube.
"""

import ast

import numpy as np
import pytest
from numba import cuda

from numba_cube.backends.cpu.passes import loop_order as looporder
from numba_cube.backends.cpu.translate import Unit, build_program

VARIANTS = ["serial", "parallel"]
GRID2 = "i, j = (__nn(__bx * __bdx + __tx), __nn(__by * __bdy + __ty))\n"


@pytest.fixture(scope="module", autouse=True)
def cache_dir(tmp_path_factory):
    """Generated modules go to a private temp dir, never to ~/.cache."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NUMBA_CUBE_CACHE_DIR", str(tmp_path_factory.mktemp("cube_cache")))
        yield


@pytest.mark.parametrize("src, axis", [
    (GRID2 + "dst[i, j] = src[i, j]", looporder.Y),
    (GRID2 + "dst[i, j] = src[i - 1, j] + src[i, j + 1]", looporder.Y),
    (GRID2 + "dst[j, i] = src[j, i]", looporder.X),
    (GRID2 + "dst[i, j] = src[j, i]", looporder.X),              # a transpose: a tie
    ("i = __nn(__bx * __bdx + __tx)\ndst[i] = src[i]", looporder.X),
    (GRID2 + "dst[i * 4 + j] = 1.0", looporder.X),                # 1-D subscripts: no vote
    ("dst[__tx, __ty] = 1.0", looporder.Y),
    (GRID2 + "dst[i, j, 0] = 1.0", looporder.Y),                 # a constant last index
])
def test_inner_axis_follows_the_last_subscript(src, axis):
    """``y`` is chosen when the last index of multi-dimensional subscripts follows ``y`` and an
    earlier index follows ``x`` in more subscripts than the other way round."""
    assert looporder.inner_axis(ast.parse(src).body) == axis


def test_swap_exchanges_every_x_and_y_name():
    """Thread ids, block ids, block and grid sizes are exchanged; z and other names are not."""
    body = ast.parse("a = __tx + __bx * __bdx + __gdx + __tz + n\nb = __ty + __by * __bdy + __gdy").body
    swapped = ast.unparse(ast.Module(looporder.swap_xy(body), []))
    assert swapped == "a = __ty + __by * __bdy + __gdy + __tz + n\nb = __tx + __bx * __bdx + __gdx"


@cuda.jit
def stencil(src, dst):
    """numba's documented 2-D form: ``i`` the first axis, ``j`` the last."""
    i, j = cuda.grid(2)
    if i >= 1 and i < src.shape[0] - 1 and j >= 1 and j < src.shape[1] - 1:
        dst[i, j] = 0.25 * (src[i - 1, j] + src[i + 1, j] + src[i, j - 1] + src[i, j + 1])


@cuda.jit
def lanes_2d(out):
    """The linear thread id (``laneid``) of every unit of a 2-D grid, at its 2-D position."""
    i, j = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = cuda.laneid


@cuda.jit
def coords_3d(out):
    """Every unit writes its (x, y, z) thread and block ids at ``out[z, x, y]`` of its global
    coordinates (the last index that follows a thread id is ``y``: walked innermost)."""
    i, j, k = cuda.grid(3)
    if k < out.shape[0] and i < out.shape[1] and j < out.shape[2]:
        out[k, i, j, 0] = cuda.threadIdx.x + 10 * cuda.blockIdx.x
        out[k, i, j, 1] = cuda.threadIdx.y + 10 * cuda.blockIdx.y
        out[k, i, j, 2] = cuda.threadIdx.z + 10 * cuda.blockIdx.z


_programs: dict = {}


def run(kernel, variant, grid, block, *args):
    if kernel not in _programs:
        _programs[kernel] = build_program(kernel.py_func)
    getattr(_programs[kernel], variant)(*grid, *block, *args)


def test_the_documented_2d_form_walks_y_innermost():
    """The generated chunk takes its geometry in swapped order (the rename is how y ends up
    innermost); a 1-D kernel's does not."""
    src = Unit(stencil.py_func, False, False, "numpy").generate()
    assert "__gdy, __gdx, __gdz, __bdy, __bdx, __bdz" in src


@pytest.mark.parametrize("variant", VARIANTS)
def test_stencil_with_partial_cubes_matches_numpy(variant):
    """A 37 x 53 stencil in 8 x 4 cubes (partial in both axes): NumPy's numbers, the border
    untouched."""
    rng = np.random.default_rng(1)
    src = rng.random((37, 53))
    dst = np.full_like(src, -1.0)
    run(stencil, variant, (5, 14, 1), (8, 4, 1), src, dst)
    expected = np.full_like(src, -1.0)
    expected[1:-1, 1:-1] = 0.25 * (src[:-2, 1:-1] + src[2:, 1:-1] + src[1:-1, :-2] + src[1:-1, 2:])
    np.testing.assert_array_equal(dst, expected)


@pytest.mark.parametrize("variant", VARIANTS)
def test_linear_thread_id_is_the_real_one(variant):
    """``laneid`` (from the linear thread id ``(ty * bdx + tx) % 32``) is unchanged by the swap."""
    out = np.full((12, 10), -1, np.int64)
    run(lanes_2d, variant, (2, 3, 1), (8, 4, 1), out)
    i, j = np.meshgrid(np.arange(12), np.arange(10), indexing="ij")
    np.testing.assert_array_equal(out, ((j % 4) * 8 + (i % 8)) % 32)


@pytest.mark.parametrize("variant", VARIANTS)
def test_three_dimensional_grid_keeps_every_coordinate(variant):
    """A 3-D grid whose subscripts make ``y`` innermost: each unit's thread and block ids are
    where its global coordinates say (z is never swapped)."""
    out = np.full((4, 6, 5, 3), -1, np.int64)
    run(coords_3d, variant, (2, 2, 2), (3, 4, 2), out)
    assert "__gdy, __gdx, __gdz" in Unit(coords_3d.py_func, False, False, "numpy").generate()
    k, i, j = np.meshgrid(np.arange(4), np.arange(6), np.arange(5), indexing="ij")
    np.testing.assert_array_equal(out[..., 0], i % 3 + 10 * (i // 3))
    np.testing.assert_array_equal(out[..., 1], j % 4 + 10 * (j // 4))
    np.testing.assert_array_equal(out[..., 2], k % 2 + 10 * (k // 2))


# ---- rows: one loop over a chunk's stretch of a row -------------------------------------------

def rows_of(src: str):
    out = looporder.global_inner(ast.parse(src).body)
    return None if out is None else ast.unparse(ast.Module(out, []))


def test_global_coordinate_becomes_one_name():
    """``__bx * __bdx + __tx`` in any operand order becomes ``__gx``; nothing else changes."""
    assert rows_of("i = __nn(__bx * __bdx + __tx)\nj = __tx + __bdx * __bx\na[i, j] = __ty") \
        == "i = __nn(__gx)\nj = __gx\na[i, j] = __ty"


@pytest.mark.parametrize("src", ["i = __tx", "i = __bx * __bdx + __tx\nb = __bx",
                                 "i = __bx * __bdx + 2 * __tx", "i = __bx * 32 + __tx"])
def test_ids_used_otherwise_keep_the_cube_segments(src):
    """A thread or block id used alone, or in another combination, keeps the per-cube loop."""
    assert rows_of(src) is None


@cuda.jit
def guarded_axpy(a, x, y, out):
    """The commonest kernel: ``cuda.grid(1)`` and an early return past the end."""
    i = cuda.grid(1)
    if i >= out.size:
        return
    out[i] = a * x[i] + y[i]


@cuda.jit
def per_cube_sums(x, out):
    """Uses ``threadIdx.x`` alone (no rows): each unit adds its lane to its element."""
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i] + cuda.threadIdx.x


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("n", [1, 255, 256, 1000, 70001])
def test_rows_match_numpy_across_chunks_and_a_partial_last_cube(variant, n):
    """A 1-D kernel in rows mode over sizes that end inside a cube and that the parallel
    variant cuts into many chunks: every element once, NumPy's value, nothing past the end."""
    x, y = np.arange(n, dtype=np.float64), np.ones(n)
    out = np.full(n + 3, -7.0)
    cubes = (n + 127) // 128
    run(guarded_axpy, variant, (cubes, 1, 1), (128, 1, 1), 2.0, x, y, out[:n])
    np.testing.assert_array_equal(out[:n], 2.0 * x + 1.0)
    np.testing.assert_array_equal(out[n:], -7.0)


@pytest.mark.parametrize("variant", VARIANTS)
def test_thread_index_alone_keeps_its_value(variant):
    """``threadIdx.x`` alone still means the unit's index in its cube."""
    x = np.zeros(300)
    out = np.zeros(300)
    run(per_cube_sums, variant, (3, 1, 1), (128, 1, 1), x, out)
    np.testing.assert_array_equal(out, np.arange(300) % 128)


@cuda.jit(device=True)
def _own_ids():
    """A device function that reads the thread and block ids itself (they are passed to it as
    keyword arguments by name, so a swapped kernel must pass the real ones)."""
    return cuda.threadIdx.x + 100 * cuda.blockIdx.x + 10000 * cuda.threadIdx.y


@cuda.jit
def ids_through_device(out):
    i, j = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = _own_ids()


@pytest.mark.parametrize("variant", VARIANTS)
def test_device_function_sees_the_real_ids(variant):
    """A device function called from a kernel whose loops are swapped reads its own
    ``threadIdx.x``, ``blockIdx.x`` and ``threadIdx.y`` as CUDA defines them."""
    out = np.full((12, 10), -1, np.int64)
    run(ids_through_device, variant, (2, 3, 1), (8, 4, 1), out)
    assert "__gdy, __gdx" in Unit(ids_through_device.py_func, False, False, "numpy").generate()
    i, j = np.meshgrid(np.arange(12), np.arange(10), indexing="ij")
    np.testing.assert_array_equal(out, i % 8 + 100 * (i // 8) + 10000 * (j % 4))
