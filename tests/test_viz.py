"""tcourse.viz: IR excerpts and the sweep/row pictures the chapters draw."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from tcourse import viz  # noqa: E402

TTIR = """#loc = loc("k.py":1:0)
module {
  tt.func public @k(%x: !tt.ptr<f32> loc("x"(#loc))) {
    %pid = tt.get_program_id x : i32 loc(#loc2)
    %r = tt.make_range {end = 1024 : i32, start = 0 : i32} : tensor<1024xi32> loc(#loc3)
    tt.return loc(#loc)
  } loc(#loc)
}
#loc2 = loc("pid"(#loc))
"""


def test_ir_lines_keeps_matches_and_strips_locations():
    out = viz.ir_lines(TTIR, r"get_program_id", r"make_range")
    assert out.splitlines() == [
        "    %pid = tt.get_program_id x : i32",
        "    %r = tt.make_range {end = 1024 : i32, start = 0 : i32} : tensor<1024xi32>",
    ]
    assert "loc" not in viz.ir_lines(TTIR, r"tt\.func")


def test_ir_lines_strips_sass_encodings():
    sass = ("        /*0010*/                   S2R R0, SR_TID.X ;   /* 0x0000000000007919 */\n"
            "                                                       /* 0x000e2e0000002100 */\n")
    assert viz.ir_lines(sass, "S2R|0x") == "        /*0010*/                   S2R R0, SR_TID.X ;"


def test_ir_lines_limit_says_how_many_were_cut():
    out = viz.ir_lines(TTIR, r"tt\.", limit=1).splitlines()
    assert out[0].startswith("  tt.func public @k")
    assert out[1] == "... (3 more matching lines)"


ROWS = [
    {"BLOCK_SIZE": b, "num_warps": w, "triton_gbs": b / w, "torch_gbs": 100.0 + w}
    for b in (256, 1024) for w in (1, 4)
]


def test_plot_bandwidth_one_line_per_warp_count_plus_torch_and_ceiling():
    ax = viz.plot_bandwidth(ROWS, x="BLOCK_SIZE", xlabel="BLOCK_SIZE", ceiling=500.0, highlight=(1024, 4))
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels[:3] == ["triton num_warps=1", "triton num_warps=4", "torch"]
    assert any("HBM ceiling 500" in lab for lab in labels)
    torch_line = ax.get_lines()[2]
    assert list(torch_line.get_ydata()) == [102.5, 102.5]  # median over num_warps at each x
    ring = ax.get_lines()[-1]
    assert list(ring.get_xdata()) == [1024] and list(ring.get_ydata()) == [256.0]
    plt.close(ax.figure)


def test_row_blocks_marks_the_masked_tail():
    ax = viz.row_blocks(3, 1000, 1024)
    img = ax.get_images()[0].get_array()
    assert img.shape == (3, 1024)
    assert img[:, :1000].sum() == 0 and img[:, 1000:].min() == 1
    assert "24 lanes/row masked" in ax.get_title()
    plt.close(ax.figure)
