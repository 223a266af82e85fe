import numpy as np
import pytest

from tcourse import tiles


def kernel_order_reference(num_pid_m, num_pid_n, group_m):
    """Independent statement of grouped ordering: walk groups of GROUP_M tile rows column by column."""
    order = []
    for g0 in range(0, num_pid_m, group_m):
        rows = range(g0, min(g0 + group_m, num_pid_m))
        for n in range(num_pid_n):
            order += [(m, n) for m in rows]
    return order


@pytest.mark.parametrize("mp,np_,g", [(5, 7, 1), (5, 7, 2), (8, 3, 8), (9, 4, 4), (3, 3, 16)])
def test_grouped_pid_is_a_permutation_matching_the_reference(mp, np_, g):
    got = [tiles.grouped_pid(p, mp, np_, g) for p in range(mp * np_)]
    assert got == kernel_order_reference(mp, np_, g)
    order = tiles.program_order(mp, np_, g)
    assert sorted(order.ravel().tolist()) == list(range(mp * np_))


def test_group_m_1_is_row_major():
    assert [tiles.grouped_pid(p, 3, 4, 1) for p in range(5)] == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0)]


def test_first_wave_counts_4096_and_8192():
    w1 = tiles.first_wave(4096, 4096, 4096, 128, 128, 1)
    w8 = tiles.first_wave(4096, 4096, 4096, 128, 128, 8)
    assert (len(w1.a_rows), len(w1.b_cols)) == (5, 32)
    assert (len(w8.a_rows), len(w8.b_cols)) == (8, 17)
    assert w8.unique_bytes() < w1.unique_bytes()
    assert w1.requested_bytes() == w8.requested_bytes() == 132 * 256 * 4096 * 2
    assert w8.a_tiles(64) == 8 * 64
    w = tiles.first_wave(8192, 8192, 8192, 128, 128, 1)
    assert (len(w.a_rows), len(w.b_cols)) == (3, 64)


def test_first_wave_smaller_than_sm_count():
    w = tiles.first_wave(100, 100, 50, 64, 64, 8)
    assert len(w.tiles) == 4 and w.a_rows == {0, 1} and w.b_cols == {0, 1}


def test_attention_tile_map_causal_and_tail():
    full = tiles.attention_tile_map(67, 16, 16, causal=False)
    assert full.shape == (5, 5) and (full[:, :4] == 1).all() and (full[:, 4] == 2).all()
    causal = tiles.attention_tile_map(64, 16, 16, causal=True)
    assert (np.triu(causal, 1) == 0).all()            # tiles above the diagonal are skipped
    assert (np.diag(causal) == 2).all()                 # diagonal tiles need the causal mask
    assert (np.tril(causal, -1)[np.tril_indices(4, -1)] == 1).all()


def test_scenes_draw_what_the_data_says():
    wave = tiles.first_wave(1024, 1024, 1024, 128, 128, 2)
    s = tiles.first_wave_scene(wave)
    (grid,) = [i for i in s.items if i["t"] == "g"]
    assert sum(n for v, n in grid["runs"] if v >= 0) == len(wave.tiles) == 64
    red = [i for i in s.items if i["t"] == "r" and i.get("fill") == "#d62728"]
    assert len(red) == len(wave.a_rows)
    walk = tiles.tile_walk_scene(67, 45, 93, 32, 32, 32, pid_m=2, pid_n=1, k_iter=2)
    hatched = [i for i in walk.items if i.get("hatch")]
    assert len(hatched) == 6   # each of A, B, C sticks out of 67x45x93 to the right and at the bottom
    assert all(i["w"] > 0 and i["h"] > 0 for i in hatched)
    inner = tiles.tile_walk_scene(67, 45, 93, 32, 32, 32, pid_m=0, pid_n=0, k_iter=0)
    assert not [i for i in inner.items if i.get("hatch")]
    attn = tiles.attention_scene(100, 32, 32, True)
    (g,) = [i for i in attn.items if i["t"] == "g"]
    m = tiles.attention_tile_map(100, 32, 32, True)
    assert sum(n for v, n in g["runs"] if v >= 0) == int((m > 0).sum())
    labels = [i["s"] for i in attn.items if i["t"] == "t"]
    assert "0" in labels and "3" in labels and not any("." in x for x in labels if x[0].isdigit())
