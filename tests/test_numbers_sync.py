"""README.md and TUTORIAL.qmd quote H200 numbers only through blocks generated from results/ (scripts/sync_numbers.py)."""
from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def load_sync():
    spec = importlib.util.spec_from_file_location("sync_numbers", ROOT / "scripts" / "sync_numbers.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_generated_numbers_match_results():
    sync = load_sync()
    stale = [name for name in sync.FILES
             if sync.render((ROOT / name).read_text(encoding="utf-8"), ROOT / "results" / "h200")
             != (ROOT / name).read_text(encoding="utf-8")]
    assert not stale, f"numbers in {stale} drifted from results/h200: run python scripts/sync_numbers.py"


def test_every_block_is_known_and_present():
    sync = load_sync()
    found = [b for name in sync.FILES for b in sync.blocks_in((ROOT / name).read_text(encoding="utf-8"))]
    assert sorted(found) == sorted(sync.GENERATORS), "each generator is used exactly once"


def test_a_changed_result_changes_the_text(tmp_path):
    sync = load_sync()
    results = tmp_path / "h200"
    shutil.copytree(ROOT / "results" / "h200", results)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    suite = json.loads((results / "bench_suite.json").read_text(encoding="utf-8"))
    case = next(c for c in suite["cases"] if c["family"] == "matmul" and c["name"] == "fp16 4096x4096x4096")
    case["vs"]["torch.matmul"]["ours_rate"] = 123.0
    (results / "bench_suite.json").write_text(json.dumps(suite), encoding="utf-8")
    new = sync.render(readme, results)
    assert new != readme and "| 123 TFLOP/s |" in new


def test_missing_recording_is_said_not_invented(tmp_path):
    sync = load_sync()
    text = "x\n<!-- generated:tutorial-attention -->\nold\n<!-- /generated:tutorial-attention -->\n"
    assert sync.NOT_YET in sync.render(text, tmp_path)


@pytest.mark.parametrize("ratio, spread, text", [
    (1.005, 0.06, "1.0×（±3%）"), (1.046, 0.04, "1.0×（±2%）"), (0.999, 0.06, "1.0×（±3%）"),
    (1.0009, 0.003, "1.00×（±0.1%）"), (0.37, 0.5, "0.37×（±25%）"), (2.59, None, "2.6×（离散度未记录）"),
    (0.969, 0.0006, "0.969×（±<0.1%）"),
])
def test_ratio_digits_follow_the_spread(ratio, spread, text):
    from tcourse.numbers import ratio_text

    assert ratio_text(ratio, spread) == text


def test_version_box_is_the_same_in_chapter_0_and_on_the_front_page():
    box = (ROOT / "site-assets" / "_versions.md").read_text(encoding="utf-8").rstrip("\n")
    nb = json.loads((ROOT / "notebooks" / "00_roadmap_and_setup.ipynb").read_text(encoding="utf-8"))
    assert any("".join(c["source"]).rstrip("\n") == box for c in nb["cells"] if c["cell_type"] == "markdown"), \
        "chapter 0 must carry site-assets/_versions.md verbatim"
    assert "{{< include site-assets/_versions.md >}}" in (ROOT / "index.qmd").read_text(encoding="utf-8")


def test_a_later_family_rerun_replaces_that_familys_rows_and_says_so(tmp_path):
    """``python -m bench --only FAMILY`` after the suite (a later commit changed that family's kernels): the
    appendix takes that family's rows from the re-run and names it; an older re-run is ignored."""
    sync = load_sync()
    results = tmp_path / "h200"
    results.mkdir()
    suite = json.loads((ROOT / "results" / "h200" / "bench_suite.json").read_text(encoding="utf-8"))
    (results / "bench_suite.json").write_text(json.dumps(suite), encoding="utf-8")
    rerun = {**suite, "families": ["attention_bwd"], "date": "2099-01-01T00:00:00+00:00",
             "cases": [c for c in suite["cases"] if c["family"] == "attention_bwd"],
             "summary": [{**r, "ours": 999.0} for r in suite["summary"] if r["family"] == "attention_bwd"]}
    (results / "bench_suite_attention_bwd.json").write_text(json.dumps(rerun), encoding="utf-8")
    text = sync.appendix_targets(results)
    bwd = [line for line in text.splitlines() if line.startswith("| attention_bwd")]
    assert bwd and all("| 999 /" in line for line in bwd) and "--only attention_bwd`（2099-01-01" in text
    assert text.count("| attention_bwd") == sum(r["family"] == "attention_bwd" for r in suite["summary"])
    rerun["date"] = "2000-01-01T00:00:00+00:00"
    (results / "bench_suite_attention_bwd.json").write_text(json.dumps(rerun), encoding="utf-8")
    assert "| 999 /" not in sync.appendix_targets(results) and "--only" not in sync.appendix_targets(results)
