"""tcourse.viz: IR excerpts and the sweep/row pictures the chapters draw."""
import pytest

from tcourse import viz

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


def texts(scene):
    return [s["s"] for s in scene.items if s["t"] == "t"]


def test_bandwidth_scene_one_line_per_warp_count_plus_torch_and_ceiling():
    s = viz.bandwidth_scene(ROWS, x="BLOCK_SIZE", xlabel="BLOCK_SIZE", ceiling=500.0)
    labels = texts(s)
    assert ["num_warps=1", "num_warps=4", "torch"] == [x for x in labels if x.startswith(("num_warps", "torch"))]
    assert "HBM 上限 500" in labels
    lines = [i for i in s.items if i["t"] == "l" and len(i["pts"]) == 2 and i.get("w") == 1.8]
    torch_line = [i for i in s.items if i["t"] == "l" and i.get("dash") == "6 3" and len(i["pts"]) == 2][0]
    assert torch_line["pts"][0][1] == torch_line["pts"][1][1]  # median over num_warps: 102.5 at both x
    assert "256" in labels and "1024" in labels and len(lines) >= 2


def test_bandwidth_ring_sits_on_the_chosen_point():
    ring = viz.bandwidth_ring(ROWS, x="BLOCK_SIZE", chosen=1024, num_warps=4, ceiling=500.0)
    (c,) = [i for i in ring.items if i["t"] == "c"]
    base = viz.bandwidth_scene(ROWS, x="BLOCK_SIZE", xlabel="", ceiling=500.0)
    dots = [(i["x"], i["y"]) for i in base.items if i["t"] == "c" and i.get("tip") == "num_warps=4: 256"]
    assert dots == [(c["x"], c["y"])]
    assert viz.bandwidth_ring(ROWS, x="BLOCK_SIZE", chosen=512, num_warps=4).items == []  # not in the sweep


def test_coverage_cells_mark_the_masked_tail():
    cells, cols = viz.coverage_cells(20, 8, max_cols=64)
    assert cols == 24 and list(cells[:8]) == [0] * 8 and list(cells[16:20]) == [2] * 4
    assert list(cells[20:]) == [viz.MASKED] * 4
    assert "4 条 lane 被 mask 关掉" in texts(viz.coverage_scene(20, 8))[0]


def test_row_blocks_scene_marks_the_masked_tail():
    s = viz.row_blocks_scene(3, 1000, 1024)
    hatched = [i for i in s.items if i["t"] == "r" and i.get("hatch")]
    assert len(hatched) == 3
    assert "每行 24 条 lane 被 mask 关掉" in texts(s)[0]
    assert not [i for i in viz.row_blocks_scene(3, 1024, 1024).items if i.get("hatch")]


def test_bars_scene_outlines_the_chosen_bar_and_marks_missing_ones():
    s = viz.bars_scene(["a", "b", "c"], [1.0, None, 3.0], [2.0, 2.0, None], chosen=2, ours_label="o",
                       ref_label="r", ylabel="y")
    bars = [i for i in s.items if i["t"] == "r" and i.get("fill") == "#4c72b0" and i["w"] > 20]
    assert len(bars) == 2 and bars[1].get("stroke") == "#d62728" and "stroke" not in bars[0]
    assert "--" in texts(s)


def test_label_falls_back_to_english_without_a_cjk_font(monkeypatch):
    monkeypatch.setattr(viz, "cjk_font", lambda: None)
    assert viz.label("累加器", "accumulator") == "accumulator"
    monkeypatch.setattr(viz, "cjk_font", lambda: "Noto Sans CJK SC")
    assert viz.label("累加器", "accumulator") == "累加器"


def test_cjk_font_is_one_matplotlib_knows():
    from matplotlib import font_manager, rcParams

    family = viz.cjk_font()
    if family is None:
        pytest.skip("no CJK font installed here (Debian: fonts-noto-cjk)")
    assert family in {f.name for f in font_manager.fontManager.ttflist}
    assert rcParams["font.sans-serif"][0] == family
