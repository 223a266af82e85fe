"""Diagrams: generator sync/determinism, structural validation, seed labels, exported SVGs.

Standard library + pytest only.  Regenerate with `python diagrams/generate_diagrams.py`,
re-export SVGs with `diagrams/export_svg.sh`.
"""
from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DIAGRAMS = ROOT / "diagrams"
sys.path.insert(0, str(DIAGRAMS))

import generate_diagrams as gen  # noqa: E402
from validate_excalidraw import validate, validate_text  # noqa: E402

SVG_NS = "{http://www.w3.org/2000/svg}"
CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")
MAX_SVG_BYTES = 1_500_000

STEMS = [
    "00_triton_learning_roadmap",
    "01_triton_programming_model",
    "02_triton_vector_add_softmax",
    "03_triton_matmul_tile_flow",
    "04_triton_autotune_debug_workflow",
    "05_triton_interview_map",
    "06_triton_groupm_program_order",
    "07_triton_flash_attention_loop",
]

# Every label of the seed's six diagrams, verbatim (one entry per line of the seed's "## 图示" blocks).
SEED_LABELS = {
    '00_triton_learning_roadmap': [
        'Triton 入门学习路线',
        '从第一个 @triton.jit 到能解释 matmul、softmax、attention kernel',
        '复习 CUDA block warp',
        '理解 GPU memory hierarchy',
        'pip install triton',
        '确认 PyTorch CUDA 环境',
        'program_id arange mask',
        '掌握 launch grid',
        '一行一个 program',
        '用 tl.max tl.sum 减少访存',
        'BLOCK_M/N/K tl.dot',
        'program 分组和 L2 复用',
        'QK softmax PV 分块',
        '理解 FlashAttention 风格',
        '学习验收标准',
        '会从 PyTorch wrapper 调用 kernel',
        '能解释 grid lambda 和 meta-parameters',
        '会画 program 对应的数据 block',
        '知道 mask 防越界和 constexpr 的作用',
        '会用 triton.testing.do_bench 或 profiler',
        '比较 baseline、Triton、torch 结果',
        '学习路线 · Excalidraw 源文件',
    ],
    '01_triton_programming_model': [
        'Triton 编程模型',
        'Triton program 是比 CUDA thread 更粗的 block-level 单元',
        'Host 侧',
        'Python wrapper',
        '准备 torch tensors',
        '计算 grid',
        'Kernel 侧',
        '@triton.jit',
        '函数被 JIT 编译为 GPU kernel',
        '数据与计算',
        'tl.load / tl.store',
        'mask + other 处理边界',
        'kernel[grid](args,',
        'BLOCK_SIZE=..., num_warps=...)',
        'tl.program_id(axis)',
        '当前 program 在 grid 中的位置',
        'tl.dot / reductions / math ops',
        '在 block tensor 上表达计算',
        'tl.arange / pointer arithmetic',
        '构造 block 内 offsets',
        'compiler lowering',
        'TTIR -> TTGIR -> LLVM/PTX/AMDGPU',
        '和 CUDA 的映射',
        'CUDA thread',
        '细粒度线程',
        '显式 threadIdx/blockIdx',
        'Triton program',
        '一个 block-level 程序',
        '一次处理向量或矩阵 tile',
        'meta-parameters',
        'BLOCK_M/N/K num_warps num_stages',
        '决定编译特化和性能',
        '编程模型 · Excalidraw 源文件',
    ],
    '02_triton_vector_add_softmax': [
        'Vector Add 与 Fused Softmax',
        '先用两个基础 kernel 建立 block tensor 和 mask 心智模型',
        'Vector Add',
        'grid = ceildiv(N, BLOCK_SIZE)',
        '每个 program 处理一段连续元素',
        'Fused Softmax',
        '一个 program 处理一行',
        'BLOCK_SIZE 取 next_power_of_2',
        'offsets = pid * BLOCK_SIZE + arange',
        'mask = offsets < N',
        'load row',
        'x - max(x)',
        'exp / sum / normalize',
        'tl.load x y',
        'z = x + y',
        'tl.store mask',
        '只读写一次 global memory',
        '比 PyTorch 多 op 路径更省 HBM',
        '共同检查点',
        'program_id 是否映射到正确数据块',
        'BLOCK_SIZE 是否影响 occupancy 和寄存器',
        'Vector Add 与 Softmax · Excalidraw 源文件',
    ],
    '03_triton_matmul_tile_flow': [
        'Triton Matmul Tile 数据流',
        '理解 BLOCK_M/N/K、tl.dot、program grouping 和 L2 复用',
        '输出 tile',
        'program_id 映射到 C 的',
        'BLOCK_M x BLOCK_N tile',
        'K 维循环',
        'A block',
        'BLOCK_M x BLOCK_K',
        'pid_m, pid_n',
        '决定 A/B/C 的指针偏移',
        'accumulator',
        'BLOCK_M x BLOCK_N',
        'float32',
        'GROUP_M',
        '让相邻 program 复用 B tile',
        '改善 L2 locality',
        '常见面试追问',
        '为什么 accumulator 用 fp32',
        '减少 K 维累加误差',
        '为什么要分组 program order',
        '提高 L2 cache 复用',
        'BLOCK_K 过大或过小分别怎样',
        '寄存器压力 vs 复用不足',
        'mask 在非整除 M/N/K 时如何保护',
        'load/store 都要考虑',
        'Matmul tile 数据流 · Excalidraw 源文件',
    ],
    '04_triton_autotune_debug_workflow': [
        'Triton Autotune 与 Debug 工作流',
        '正确性、benchmark、autotune、profile 要按证据闭环',
        'torch reference',
        '小 shape assert_close',
        'triton.testing.do_bench',
        'warmup + repeat',
        'triton.Config',
        'key 决定何时重新搜索',
        'static_print device_print',
        'Triton interpreter',
        'Nsight/Proton',
        '看内存、寄存器、occupancy',
        '不要犯的错',
        '只测整除 shape',
        '尾部 mask 没覆盖',
        'autotune kernel 有副作用',
        '没有 reset_to_zero 或 restore_value',
        '只看平均耗时',
        '忽略 p95、冷启动、cache 状态',
        'Autotune、debug、profile · Excalidraw 源文件',
    ],
    '05_triton_interview_map': [
        'Triton 面试速查图',
        '把 Triton 学习收束成可讲述的题目框架',
        '一句话定义',
        'Triton 是 Python-based GPU kernel DSL 和 compiler',
        '让用户用 block-level program 写 DNN 自定义算子',
        '常用于 PyTorch 生态中的 fusion 和 matmul/attention 优化',
        '必须讲清的机制',
        'program_id 和 grid',
        '决定数据块映射',
        'mask 和 pointer arithmetic',
        '决定边界安全',
        'meta-parameters',
        '决定编译特化和搜索空间',
        'tl.dot / reductions',
        '决定 block tensor 计算',
        '常见比较题',
        'vs CUDA',
        'Triton 更少样板 更适合块级 DNN kernel',
        'CUDA 控制更细',
        'vs TileLang',
        'Triton 生态更成熟',
        'TileLang 更强调 tiled dataflow + TVM 衔接',
        'vs torch.compile',
        'Inductor 可生成 Triton',
        '手写 Triton 用于更可控的热点 kernel',
        '回答模板',
        '先画数据块',
        '再讲 program/grid',
        '再讲 tl.load/tl.store/tl.dot',
        '最后讲调优证据和边界条件',
        '面试速查 · Excalidraw 源文件',
    ],
}


def load(stem: str) -> dict:
    return json.loads((DIAGRAMS / f"{stem}.excalidraw").read_text(encoding="utf-8"))


def text_lines(doc: dict) -> set[str]:
    return {line for e in doc["elements"] if e["type"] == "text" for line in e["text"].split("\n")}


# --------------------------------------------------------------------------- generator
def test_generator_covers_exactly_the_committed_diagrams():
    assert sorted(gen.render_all()) == [f"{s}.excalidraw" for s in STEMS]
    assert sorted(p.name for p in DIAGRAMS.glob("*.excalidraw")) == [f"{s}.excalidraw" for s in STEMS]


def test_generator_is_deterministic():
    assert gen.render_all() == gen.render_all()


@pytest.mark.parametrize("stem", STEMS)
def test_committed_file_matches_generator(stem):
    name = f"{stem}.excalidraw"
    assert (DIAGRAMS / name).read_text(encoding="utf-8") == gen.render_all()[name], (
        f"{name} differs from the generator: run python diagrams/generate_diagrams.py")


def test_check_mode_flags_a_stale_file(tmp_path):
    cmd = [sys.executable, str(DIAGRAMS / "generate_diagrams.py"), "--out", str(tmp_path)]
    assert subprocess.run(cmd, capture_output=True).returncode == 0
    assert subprocess.run(cmd + ["--check"], capture_output=True).returncode == 0
    target = tmp_path / f"{STEMS[3]}.excalidraw"
    target.write_text(target.read_text(encoding="utf-8").replace("GROUP_M", "GROUP_X", 1), encoding="utf-8")
    res = subprocess.run(cmd + ["--check"], capture_output=True, text=True)
    assert res.returncode == 1
    assert target.name in res.stderr


def test_generator_refuses_a_label_that_does_not_fit():
    d = gen.Diagram("99_tmp", "t", "s", "f", 400, [gen.Box("b", 0, 150, 60, "这段文字放不进这个盒子", h=40)])
    with pytest.raises(gen.LayoutError):
        gen.build(d)


def test_groupm_mapping_matches_triton_tutorial_order():
    # 4 x 4 tiles, GROUP_M = 2: the first 4 programs cover a 2 x 2 square
    got = [gen.grouped_pid(p, 4, 4, 2) for p in range(8)]
    assert got == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2), (0, 3), (1, 3)]
    # every tile is visited exactly once, also with a ragged last group
    assert sorted(gen.grouped_pid(p, 5, 3, 2) for p in range(15)) == [(m, n) for m in range(5) for n in range(3)]


# --------------------------------------------------------------------------- content
@pytest.mark.parametrize("stem", list(SEED_LABELS))
def test_every_seed_label_is_present(stem):
    missing = [lbl for lbl in SEED_LABELS[stem] if lbl not in text_lines(load(stem))]
    assert not missing, f"{stem} lacks seed labels: {missing}"


@pytest.mark.parametrize("stem", STEMS)
def test_cjk_text_uses_excalifont(stem):
    bad = [e["id"] for e in load(stem)["elements"]
           if e["type"] == "text" and CJK.search(e["text"]) and e["fontFamily"] != 5]
    assert not bad, f"CJK text outside Excalifont (renders as boxes in Excalidraw): {bad}"


@pytest.mark.parametrize("stem", STEMS)
def test_diagram_has_bound_labels_and_arrows(stem):
    els = load(stem)["elements"]
    shapes = [e for e in els if e["type"] in ("rectangle", "ellipse", "diamond")]
    labelled = [s for s in shapes if any(b["type"] == "text" for b in s["boundElements"])]
    assert len(labelled) >= 8
    for a in (e for e in els if e["type"] == "arrow"):
        assert a["startBinding"] and a["endBinding"], f"{a['id']} is not bound at both ends"


# --------------------------------------------------------------------------- validator
@pytest.mark.parametrize("stem", STEMS)
def test_committed_file_is_structurally_valid(stem):
    assert validate_text((DIAGRAMS / f"{stem}.excalidraw").read_text(encoding="utf-8")) == []


def _scene():
    """A small valid scene: box A with label, box B, arrow A -> B."""
    return copy.deepcopy(gen.build(gen.Diagram(
        "98_tmp", "T", "S", "F", 600,
        [gen.Box("a", 0, 150, 200, "A 盒子"), gen.Box("b", 320, 150, 200, "B 盒子")],
        [gen.Arrow("a", "b")])))


def _el(doc, suffix):
    return next(e for e in doc["elements"] if e["id"].endswith(suffix))


def _rules(errs):
    return {e.split("]")[0] + "]" for e in errs}


def test_fixture_scene_is_valid():
    assert validate(_scene()) == []


def _broken_top_type(d):
    d["type"] = "something-else"


def _broken_elements(d):
    d["elements"] = {}


def _missing_field(d):
    del _el(d, "-a")["seed"]


def _wrong_field_type(d):
    _el(d, "-a")["x"] = "300"


def _unknown_type(d):
    _el(d, "-a")["type"] = "blob"


def _bad_font(d):
    _el(d, "-a.label")["fontFamily"] = 42


def _nan_width(d):
    _el(d, "-b")["width"] = float("nan")


def _inf_point(d):
    _el(d, "a-b")["points"][1] = [float("inf"), 0]


def _short_points(d):
    _el(d, "a-b")["points"] = [[0, 0]]


def _dup_id(d):
    _el(d, "-b")["id"] = _el(d, "-a")["id"]


def _dangling_container(d):
    _el(d, "-a.label")["containerId"] = "nope"


def _one_sided_container(d):
    _el(d, "-a")["boundElements"] = [b for b in _el(d, "-a")["boundElements"] if b["type"] != "text"]


def _dangling_binding(d):
    _el(d, "a-b")["endBinding"]["elementId"] = "nope"


def _one_sided_binding(d):
    _el(d, "-b")["boundElements"] = []


def _bound_list_missing(d):
    _el(d, "-b")["boundElements"].append({"id": "ghost", "type": "arrow"})


def _bound_list_wrong_arrow(d):
    d["elements"].append(dict(copy.deepcopy(_el(d, "a-b")), id="x2", startBinding=None, endBinding=None))
    _el(d, "-b")["boundElements"].append({"id": "x2", "type": "arrow"})


def _label_outside(d):
    _el(d, "-a.label")["x"] += 500


def _overlap(d):
    t = _el(d, "-b.label")
    t.update(containerId=None, x=_el(d, "-a.label")["x"] + 3, y=_el(d, "-a.label")["y"] + 2)
    _el(d, "-b")["boundElements"] = [b for b in _el(d, "-b")["boundElements"] if b["type"] != "text"]


@pytest.mark.parametrize("breaker, rule", [
    (_broken_top_type, "[json]"),
    (_broken_elements, "[json]"),
    (_missing_field, "[fields]"),
    (_wrong_field_type, "[fields]"),
    (_unknown_type, "[fields]"),
    (_bad_font, "[fields]"),
    (_short_points, "[fields]"),
    (_nan_width, "[finite]"),
    (_inf_point, "[finite]"),
    (_dup_id, "[unique-id]"),
    (_dangling_container, "[container]"),
    (_one_sided_container, "[container]"),
    (_dangling_binding, "[binding]"),
    (_one_sided_binding, "[binding]"),
    (_bound_list_missing, "[bound-list]"),
    (_bound_list_wrong_arrow, "[bound-list]"),
    (_label_outside, "[label-fit]"),
    (_overlap, "[overlap]"),
])
def test_validator_catches(breaker, rule):
    doc = _scene()
    breaker(doc)
    assert rule in _rules(validate(doc))


def test_validator_rejects_bad_json():
    assert _rules(validate_text("{not json")) == {"[json]"}


def test_validator_reads_nan_from_file_text():
    text = json.dumps(_scene()).replace('"width": 200', '"width": NaN', 1)
    assert "[finite]" in _rules(validate_text(text))


def test_validator_cli(tmp_path):
    bad = tmp_path / "bad.excalidraw"
    doc = _scene()
    _dup_id(doc)
    bad.write_text(json.dumps(doc), encoding="utf-8")
    cli = [sys.executable, str(DIAGRAMS / "validate_excalidraw.py")]
    assert subprocess.run(cli + [str(DIAGRAMS)], capture_output=True).returncode == 0
    res = subprocess.run(cli + [str(bad)], capture_output=True, text=True)
    assert res.returncode == 1 and "[unique-id]" in res.stdout


# --------------------------------------------------------------------------- SVG exports
def svg_lines(stem: str) -> list[str]:
    root = ET.parse(DIAGRAMS / f"{stem}.svg").getroot()
    assert root.tag == SVG_NS + "svg"
    return ["".join(t.itertext()) for t in root.iter(SVG_NS + "text")]


@pytest.mark.parametrize("stem", STEMS)
def test_svg_exists_is_small_and_embeds_fonts(stem):
    path = DIAGRAMS / f"{stem}.svg"
    assert path.is_file(), f"missing {path.name}: run diagrams/export_svg.sh"
    assert path.stat().st_size < MAX_SVG_BYTES
    body = path.read_text(encoding="utf-8")
    assert "@font-face" in body and "Xiaolai" in body, "CJK font not embedded: Chinese would render as boxes"


@pytest.mark.parametrize("stem", STEMS)
def test_svg_shows_every_label_of_its_scene(stem):
    shown = set(svg_lines(stem))
    missing = sorted(text_lines(load(stem)) - shown)
    assert not missing, f"{stem}.svg is stale (run diagrams/export_svg.sh); missing: {missing[:5]}"


@pytest.mark.parametrize("stem", STEMS)
def test_svg_has_no_stale_labels(stem):
    extra = sorted(set(svg_lines(stem)) - text_lines(load(stem)))
    assert not extra, f"{stem}.svg shows text the scene no longer has: {extra[:5]}"
