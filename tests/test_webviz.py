"""tcourse.webviz: what a browser panel stores, and the rules it enforces before a page gets it."""
import json
import re

import pytest

from tcourse import webviz


def square(n):
    s = webviz.Scene(100, 50)
    s.rect(0, 0, n, n, fill="#000")
    return s


def spec_of(panel):
    html = panel._repr_html_()
    return json.loads(re.search(r'class="tcp-data">(.*?)</script>', html, re.S).group(1).replace("<\\/", "</"))


def test_frames_are_stored_per_option_index_of_their_dependencies_only():
    p = webviz.Panel(n=[1, 2, 3], m=[10, 20], value={"n": 2})
    p.picture(square, "n").text(lambda n, m: f"{n * m}", "n", "m")
    spec = spec_of(p)
    assert [(c["name"], c["index"], c["shown"]) for c in spec["controls"]] == [("n", 1, ["1", "2", "3"]),
                                                                               ("m", 0, ["10", "20"])]
    pic, txt = spec["views"]
    assert sorted(pic["layers"][0]["frames"]) == ["0", "1", "2"]
    assert pic["layers"][0]["frames"]["2"]["items"][0]["w"] == 3
    assert txt["frames"]["2|1"] == "60" and len(txt["frames"]) == 6


def test_output_is_self_contained():
    html = webviz.Panel(n=[1, 2]).picture(square, "n")._repr_html_()
    assert "window.tcoursePanel" in html
    assert not re.search(r"<script[^>]*\bsrc=|fetch\(|XMLHttpRequest|import\(", html)  # no CDN, no server
    assert html.count('class="tcourse-panel"') == 1


def test_a_slider_that_changes_nothing_is_refused():
    p = webviz.Panel(n=[1, 2], m=[1, 2]).picture(square, "n")
    with pytest.raises(ValueError, match=r"\['m'\]"):
        p._repr_html_()


def test_unknown_dependency_and_value_are_refused():
    with pytest.raises(KeyError):
        webviz.Panel(n=[1]).picture(square, "k")
    with pytest.raises(ValueError):
        webviz.Panel(n=[1, 2], value={"n": 3})


def test_grid_is_run_length_encoded():
    s = webviz.Scene(10, 10)
    s.grid(0, 0, 1, 1, 4, [0, 0, 0, -2, -1, -1, 1, 1], ["#000", "#fff"])
    assert s.items[0]["runs"] == [[0, 3], [-2, 1], [-1, 2], [1, 2]]


@pytest.mark.parametrize("hi", [7.0, 4246.0, 0.3, 1.0])
def test_nice_ticks_cover_the_range(hi):
    t = webviz.nice_ticks(0, hi)
    assert t[0] == 0 and t[-1] >= hi and len(t) <= 8
    steps = {round(b - a, 9) for a, b in zip(t, t[1:])}
    assert len(steps) == 1


def test_a_scene_shows_itself_as_a_panel_without_sliders():
    html = square(3)._repr_html_()
    assert '"controls":[]' in html and repr(square(3)) == "webviz.Scene(100x50, 1 shapes)"
