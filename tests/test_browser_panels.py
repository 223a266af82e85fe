"""The browser panels in a real browser (headless Chromium): every panel mounts, and moving each of
its sliders redraws it, with no kernel and no network (a file:// page of the chapters' own pictures).

Skips where no Chromium is installed (Debian: ``apt-get install chromium``); ``CHROMIUM=...`` picks one.
"""
import html
import json
import os
import re
import shutil
import subprocess

import pytest

from tcourse import quiz, tiles, viz, webviz

CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")

# For every range input of every panel: the panel's pictures before, then after moving it one step
# (down from the top end, else up); the page records what changed and any script error.
DRIVER = """
<pre id="result"></pre>
<script>
window.addEventListener("load", function () {
  const out = {errors: window.__errors, panels: []};
  document.querySelectorAll(".tcourse-panel").forEach(function (p) {
    const stage = p.querySelector(".tcp-stage");
    const entry = {mounted: !!stage && !p.querySelector(".tcp-fallback"), svgs: p.querySelectorAll("svg").length,
                   moves: []};
    p.querySelectorAll("input[type=range]").forEach(function (input) {
      const before = stage.innerHTML;
      input.value = +input.value === +input.max ? +input.value - 1 : +input.value + 1;
      input.dispatchEvent(new Event("input"));
      entry.moves.push({name: input.name, changed: stage.innerHTML !== before});
    });
    out.panels.push(entry);
  });
  out.quizzes = Array.from(document.querySelectorAll(".tcourse-quiz .tcq-question")).map(function (q) {
    const fb = q.querySelector(".tcq-feedback"), before = fb.textContent;
    q.querySelector("input[type=radio]").checked = true;
    q.querySelector("button").click();
    return {before: before, after: fb.textContent};
  });
  document.getElementById("result").textContent = JSON.stringify(out);
});
</script>
"""
ERRORS = "<script>window.__errors = []; window.onerror = function (m) { window.__errors.push(String(m)); };</script>"

SWEEP = [{"BLOCK_SIZE": b, "num_warps": w, "triton_gbs": 1000.0 + b / w, "torch_gbs": 1500.0}
         for b in (256, 1024, 4096) for w in (1, 4)]


def chapter_panels() -> list:
    """One panel of each kind the chapters show (the same scene functions, small option lists)."""
    cover = webviz.Panel(n=[20, 37], BLOCK_SIZE=[8, 16])
    cover.picture(lambda n, BLOCK_SIZE: viz.coverage_scene(n, BLOCK_SIZE), "n", "BLOCK_SIZE")
    sweep = webviz.Panel(BLOCK_SIZE=[256, 1024, 4096], num_warps=[1, 4], value={"BLOCK_SIZE": 1024})
    sweep.picture(lambda: viz.bandwidth_scene(SWEEP, x="BLOCK_SIZE", xlabel="BLOCK_SIZE", ceiling=4000.0),
                  overlay=(lambda BLOCK_SIZE, num_warps: viz.bandwidth_ring(
                      SWEEP, x="BLOCK_SIZE", chosen=BLOCK_SIZE, num_warps=num_warps, ceiling=4000.0),
                      "BLOCK_SIZE", "num_warps"))
    sweep.text(lambda BLOCK_SIZE, num_warps: f"{BLOCK_SIZE // (32 * num_warps)} elements/thread",
               "BLOCK_SIZE", "num_warps")
    walk = webviz.Panel(pid_m=[0, 2], k_iter=[0, 1, 2])
    walk.picture(lambda pid_m, k_iter: tiles.tile_walk_scene(67, 45, 93, 32, 32, 32, pid_m, 1, k_iter),
                 "pid_m", "k_iter")
    wave = webviz.Panel(GROUP_M=[1, 8], tile=[128, 256])
    wave.picture(lambda GROUP_M, tile: tiles.first_wave_scene(tiles.first_wave(4096, 4096, 4096, tile, tile, GROUP_M)),
                 "GROUP_M", "tile")
    attn = webviz.Panel(BLOCK_M=[16, 64], causal=[False, True])
    attn.picture(lambda BLOCK_M, causal: tiles.attention_scene(1000, BLOCK_M, 64, causal), "BLOCK_M", "causal")
    labels = ["64×64\nK32\nw4 s3", "128×128\nK64\nw8 s3"]
    bars = webviz.Panel(config=labels)
    bars.picture(lambda config: viz.bars_scene(labels, [300.0, None], [500.0, 520.0], chosen=labels.index(config),
                                               ours_label="triton", ref_label="cuBLAS", ylabel="TFLOP/s"), "config")
    return [cover, sweep, walk, wave, attn, bars]


def run_page(tmp_path, panels, quizzes=()) -> dict:
    page = tmp_path / "panels.html"
    page.write_text("<!doctype html><meta charset='utf-8'><body>" + ERRORS
                    + "".join(p._repr_html_() for p in [*panels, *quizzes]) + DRIVER, encoding="utf-8")
    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                          f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=10000",
                          "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=90).stdout
    found = re.search(r'<pre id="result">(.*?)</pre>', dom, re.S)
    assert found and found.group(1), f"the page did not report (Chromium output: {dom[-500:]!r})"
    return json.loads(html.unescape(found.group(1)))


@pytest.mark.skipif(not CHROMIUM, reason="no Chromium here (Debian: apt-get install chromium)")
def test_every_slider_redraws_its_panel_in_chromium(tmp_path):
    panels = chapter_panels()
    qs = quiz.Quiz(quiz.load("ch07", "programs"))
    result = run_page(tmp_path, panels, [qs])
    assert result["errors"] == []
    assert len(result["panels"]) == len(panels)
    for spec, got in zip(panels, result["panels"]):
        assert got["mounted"] and got["svgs"] >= 1, spec
        assert [m["name"] for m in got["moves"]] == list(spec.controls)
        assert all(m["changed"] for m in got["moves"]), (spec, got["moves"])
    # a quiz shows nothing until a choice is checked; then the feedback for that choice (option A)
    assert result["quizzes"] == [{"before": "", "after": quiz.grade(q, 0)[1]} for q in qs.questions]


@pytest.mark.skipif(not CHROMIUM, reason="no Chromium here (Debian: apt-get install chromium)")
def test_the_check_sees_a_slider_that_changes_nothing(tmp_path):
    dead = webviz.Panel(BLOCK_SIZE=[8, 16], num_warps=[1, 4])
    dead.picture(lambda BLOCK_SIZE, num_warps: viz.coverage_scene(20, BLOCK_SIZE), "BLOCK_SIZE", "num_warps")
    moves = run_page(tmp_path, [dead])["panels"][0]["moves"]
    assert moves == [{"name": "BLOCK_SIZE", "changed": True}, {"name": "num_warps", "changed": False}]
