"""LMS/autograder exports (grader/formats.py), checked against the platforms' documented formats
(tests/platform_schemas.py), hidden-test visibility, and one real `grade --format` run."""
from __future__ import annotations

import copy
import csv
import io
import json
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path

import pytest

import gradebook_fixtures as fx
import platform_schemas as schema
from grader import cli, formats, registry, sandbox

REPO = Path(__file__).resolve().parent.parent
NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)
CPU_POINTS = {e: sum(c.points for c in registry.get(e).cases_for("cuda", 0) if not c.gpu_only) for e in ("ex01_axpy", "ex02_softmax")}


def entries() -> list[formats.Entry]:
    return [
        formats.Entry("alice-1", "/subs/alice_1001_501_ex01.ipynb", fx.result("ex01_axpy"), "ok"),
        formats.Entry("bob-2", "/subs/bob_LATE_1002_502_ex01.ipynb", fx.result("ex01_axpy", {0: "oob", 3: "nan"}), "incomplete"),
        formats.Entry("carol-3", "/subs/carol.ipynb", fx.result("ex02_softmax", dict.fromkeys(range(200), "timeout")), "incomplete"),
        formats.Entry("dave-4", "/subs/dave_1004_504_x.ipynb", None, "unusable: 不是合法的 JSON"),
        formats.Entry("erin-5", "/subs/erin_1005_505_ex01.ipynb", None, "grader error: KeyError: 'x'"),
    ]


def test_every_format_conforms_to_its_platform(tmp_path):
    written = formats.write(list(formats.NAMES), tmp_path, entries(), NOW)
    assert {p.relative_to(tmp_path).parts[0] for p in written} == {"canvas.csv", "junit.xml", "gradescope", "prairielearn"}
    assert schema.check_canvas_csv((tmp_path / "canvas.csv").read_text(encoding="utf-8")) == []
    assert schema.check_junit((tmp_path / "junit.xml").read_text(encoding="utf-8")) == []
    for stem in ("alice-1", "bob-2", "carol-3", "dave-4"):
        assert schema.check_gradescope(json.loads((tmp_path / "gradescope" / f"{stem}.json").read_text(encoding="utf-8"))) == []
        assert schema.check_prairielearn((tmp_path / "prairielearn" / f"{stem}.json").read_text(encoding="utf-8")) == []
    # a grader error is the instructor's problem: nothing student-facing is written for it
    assert not (tmp_path / "gradescope" / "erin-5.json").exists()


def test_scores_carry_over():
    e = entries()
    gs = formats.gradescope(e[1], NOW)
    assert gs["score"] == e[1].result["score"] == sum(t["score"] for t in gs["tests"])
    assert sum(t["max_score"] for t in gs["tests"]) == e[1].result["max_score"]  # skipped GPU tests count 0
    assert [t["status"] for t in gs["tests"] if "status" in t].count("failed") == 2
    pl = formats.prairielearn(e[1], NOW)
    assert pl["score"] == pytest.approx(e[1].result["score"] / e[1].result["max_score"])
    assert formats.prairielearn(e[3], NOW) == {"gradable": False, "score": 0.0, "format_errors": ["不是合法的 JSON"]}
    suites = {s.get("name"): s for s in ET.fromstring(formats.junit(e))}
    cpu_cases = sum(not c.gpu_only for c in registry.get("ex02_softmax").cases_for("cuda", 0))
    assert (suites["bob-2"].get("failures"), suites["carol-3"].get("errors"), suites["dave-4"].get("errors")) == \
        ("2", str(cpu_cases), "1")
    assert suites["bob-2"].get("skipped") == "3"


def test_canvas_rows_students_and_points():
    e = entries() + [formats.Entry("alice-6", "/subs/alice_1001_777_ex01_v2.ipynb", fx.result("ex01_axpy", {1: "tol"}),
                                   "incomplete")]
    rows = list(csv.reader(io.StringIO(formats.canvas_csv(e))))
    assert rows[0] == schema.CANVAS_HEAD + ["ex01_axpy", "ex02_softmax"]
    assert rows[1] == ["Points Possible", "", "", "", "", f"{CPU_POINTS['ex01_axpy']:g}", f"{CPU_POINTS['ex02_softmax']:g}"]
    by = {r[0]: r for r in rows[2:]}
    assert by["alice"][1] == "1001" and by["alice"][5] == f"{CPU_POINTS['ex01_axpy']:g}"  # the better of her two files
    assert by["bob"][1] == "1002" and by["bob"][5] == f"{CPU_POINTS['ex01_axpy'] - 2:g}"  # late: keeps its user id
    assert by["carol"][1] == "" and by["carol"][6] == "0"      # not a Canvas download name
    assert by["dave"][5:] == ["", ""]                          # unusable: no score to import


def test_a_file_name_is_never_a_spreadsheet_formula_and_the_seed_stays_with_the_instructor():
    """A submission's file name is the learner's choice: "=HYPERLINK(...)" named a Canvas row (found 2026-12-07).
    Text cells starting like a formula get a leading '. The run's seed is in the instructor's files, not the
    student-facing results.json."""
    e = [formats.Entry("x", '/subs/=HYPERLINK("http:evil";"x")+1.ipynb', fx.result("ex01_axpy"), "ok"),
         formats.Entry("y", "/subs/@SUM(A1)_1001_501_ex01.ipynb", fx.result("ex01_axpy"), "ok")]
    cells = [c for r in csv.reader(io.StringIO(formats.canvas_csv(e))) for c in r[:2]]
    assert "'=HYPERLINK(\"http:evil\";\"x\")+1" in cells and "'@SUM(A1)" in cells
    assert not any(c[:1] in "=+-@" for c in cells if c)
    assert "seed" not in json.dumps(formats.gradescope(e[0], NOW)) and "seed" in formats.junit(e)


def test_hidden_tests_are_hidden_from_students_until_the_date():
    r = fx.result("ex01_axpy", {5: "oob"}, hidden={4, 5}, hidden_until="2026-12-15T00:00:00+00:00")
    e = formats.Entry("s", "/subs/s.ipynb", r, "incomplete")
    names = {r["tests"][4]["name"], r["tests"][5]["name"]}
    secret = r["tests"][5]["message"]
    for before in (formats.gradescope(e, NOW), formats.prairielearn(e, NOW)):
        text = json.dumps(before, ensure_ascii=False)
        assert not any(n in text for n in names) and secret not in text
        assert text.count(formats.HIDDEN_MSG) == 2
    gs = formats.gradescope(e, NOW)
    assert gs["score"] == r["score"] and [t["score"] for t in gs["tests"]] == [t["points"] for t in r["tests"]]
    after = datetime(2026, 12, 16, tzinfo=timezone.utc)
    assert secret in json.dumps(formats.gradescope(e, after), ensure_ascii=False)
    # the instructor's formats show everything, whatever the date
    assert all(n in formats.junit([e]) for n in names) and secret in formats.junit([e])
    zulu = formats.Entry("s", "/subs/s.ipynb", {**r, "hidden_until": "2026-12-15T00:00:00Z"}, "incomplete")
    assert formats.is_hidden(zulu.result, r["tests"][4], NOW) and not formats.is_hidden(zulu.result, r["tests"][4], after)
    forever = formats.Entry("s", "/subs/s.ipynb", {**r, "hidden_until": None}, "incomplete")
    assert secret not in json.dumps(formats.prairielearn(forever, after), ensure_ascii=False)


def test_prairielearn_stays_under_its_limit():
    r = fx.result("ex01_axpy", dict.fromkeys(range(200), "oob"))  # every case
    for t in r["tests"]:
        t["message"] = "越界写 " * 40_000
    text = json.dumps(formats.prairielearn(formats.Entry("s", "s.ipynb", r, "incomplete"), NOW), ensure_ascii=False)
    assert len(text.encode()) <= formats.PL_LIMIT and schema.check_prairielearn(text) == []


def test_parse_formats():
    assert formats.parse_formats(["csv,junit", "gradescope", "csv"]) == ["csv", "junit", "gradescope"]
    assert formats.parse_formats(None) == []
    with pytest.raises(ValueError, match="moodle"):
        formats.parse_formats(["csv,moodle"])


# ----- every schema check can fail -------------------------------------------------------------------
def _gs():
    return formats.gradescope(entries()[1], NOW)


@pytest.mark.parametrize("spoil, why", [
    (lambda d: d.pop("score") and d["tests"][0].pop("score"), "no top-level score"),
    (lambda d: d.update(score="9"), "score is not a number"),
    (lambda d: d["tests"][0].update(status="error"), "not passed/failed"),
    (lambda d: d["tests"][0].update(visibility="secret"), "visibility"),
    (lambda d: d.update(output_format="rtf"), "output_format"),
    (lambda d: d["tests"][0].update(points=1), "unknown key 'points'"),
])
def test_gradescope_check_fails(spoil, why):
    d = copy.deepcopy(_gs())
    spoil(d)
    assert any(why in p for p in schema.check_gradescope(d))


@pytest.mark.parametrize("spoil, why", [
    (lambda d: d.update(score=1.5), "not a number in [0, 1]"),
    (lambda d: d.pop("score"), "needs a score"),
    (lambda d: d.update(gradable="yes"), "not a boolean"),
    (lambda d: d["tests"][0].update(points=99), "outside [0, max_points"),
    (lambda d: d.update(output="x" * 1_000_001), "over PrairieLearn's 1 MB"),
    (lambda d: d.update(gradable=False, format_errors=[1]), "format_errors"),
])
def test_prairielearn_check_fails(spoil, why):
    d = copy.deepcopy(formats.prairielearn(entries()[1], NOW))
    spoil(d)
    assert any(why in p for p in schema.check_prairielearn(json.dumps(d)))


@pytest.mark.parametrize("old, new, why", [
    ('failures="2"', 'failures="1"', "failures=1 but"),
    ("testsuites", "suites", "not <testsuites>"),
    ('<testcase name="n=1 float32"', "<testcase", "lacks its name"),
    ("</testsuite>", "<bogus/></testsuite>", "holds <bogus>"),
    ('time="8.000"', 'time="eight"', "is not a duration"),
])
def test_junit_check_fails(old, new, why):
    text = formats.junit(entries())
    assert old in text
    assert any(why in p for p in schema.check_junit(text.replace(old, new)))


@pytest.mark.parametrize("old, new, why", [
    ("Student,ID", "Name,ID", "header must start"),
    ("Points Possible,,,,,", "Points Possible,,,,,nine", "Points Possible"),
    ("alice,1001,,,,", ",,,,,", "names no student"),
    ("alice,1001,,,,", "alice,1001,,,,A+", "is not a number"),
])
def test_canvas_check_fails(old, new, why):
    text = formats.canvas_csv(entries())
    assert old in text
    assert any(why in p for p in schema.check_canvas_csv(text.replace(old, new, 1)))


# ----- the real command ------------------------------------------------------------------------------
def test_grade_writes_every_format_for_real_submissions(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "ann_2001_9001_ex01.ipynb").write_bytes((REPO / "solutions" / "ex01_axpy.ipynb").read_bytes())
    (subs / "ben_2002_9002_ex01.ipynb").write_text("not json", encoding="utf-8")
    out = tmp_path / "out"
    args = ["grade", str(subs), "--out", str(out), "--device", "cpu", "--timeout", "60",
            "--format", "csv,junit", "--format", "gradescope,prairielearn"]
    args += [] if sandbox.choose().isolated else ["--unsafe-no-sandbox"]  # a laptop without bubblewrap
    assert cli.main(args) == 0
    rows = list(csv.reader(open(out / "canvas.csv", encoding="utf-8")))
    assert rows[2][:2] == ["ann", "2001"] and float(rows[2][5]) == float(rows[1][5]) > 0
    assert schema.check_canvas_csv((out / "canvas.csv").read_text(encoding="utf-8")) == []
    assert schema.check_junit((out / "junit.xml").read_text(encoding="utf-8")) == []
    gs = sorted((out / "gradescope").glob("*.json"))
    pl = sorted((out / "prairielearn").glob("*.json"))
    assert len(gs) == len(pl) == 2
    assert all(schema.check_gradescope(json.loads(p.read_text(encoding="utf-8"))) == [] for p in gs)
    assert all(schema.check_prairielearn(p.read_text(encoding="utf-8")) == [] for p in pl)
    assert {json.loads(p.read_text(encoding="utf-8"))["gradable"] for p in pl} == {True, False}
    graded = next(out.glob("ann_*.json")).stat().st_mtime_ns
    assert cli.main(args) == 0  # unchanged: not graded again, the exports are written again
    assert next(out.glob("ann_*.json")).stat().st_mtime_ns == graded
    assert cli.main(["grade", str(subs), "--out", str(out), "--format", "moodle"]) == 2
