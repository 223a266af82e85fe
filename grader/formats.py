"""Results in the formats that LMS and autograder platforms read, from the per-submission result JSON.

``python -m grader grade ... --format csv,gradescope,prairielearn,junit`` writes, besides the
gradebook:

- ``csv``: ``canvas.csv``, a Canvas gradebook import (one row per student, one column per exercise,
  a "Points Possible" row). The student comes from the file name Canvas gives downloaded
  submissions (``name_12345_67890_file.ipynb``, 12345 being the Canvas user id); other names go in
  the "Student" column with the id left empty.
- ``gradescope``: ``gradescope/<stem>.json``, Gradescope's autograder ``results.json``.
- ``prairielearn``: ``prairielearn/<stem>.json``, PrairieLearn's external-grading ``results.json``
  (score in [0, 1], ``gradable: false`` for a file that cannot be graded, at most 1 MB).
- ``junit``: ``junit.xml``, one ``<testsuite>`` per submission, for CI dashboards.

Visibility: a test whose ``visibility`` is ``"hidden"`` (until the result's ``hidden_until``, or
for good without one) counts in every score, but the student-facing formats (Gradescope,
PrairieLearn) show it only as a numbered hidden test, without its name or message. The
instructor's formats (Canvas CSV, JUnit, the per-submission JSON) show everything.
"""
from __future__ import annotations

import csv
import io
import json
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

NAMES = ("csv", "gradescope", "prairielearn", "junit")
PL_LIMIT = 1_000_000  # bytes: PrairieLearn's limit on results.json
HIDDEN_MSG = "隐藏测试：已评分并计入总分，名称和细节在公布之后才显示。"
CANVAS_FIELDS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
# Canvas "Download Submissions": name[_LATE]_<user id>_<submission id>_<original file name>
CANVAS_NAME = re.compile(r"^(?P<name>[^_]+?)(?:_LATE)?_(?P<uid>\d+)_\d+_")


@dataclass
class Entry:
    """One graded file: its output stem, path, and result JSON (None when it could not be graded)."""
    stem: str
    file: str
    result: dict | None
    status: str  # the gradebook's status column: "ok", "incomplete", "unusable: ...", ...


def parse_formats(values: list[str] | None) -> list[str]:
    """``--format a,b --format c`` -> [a, b, c]; raises ValueError on an unknown name."""
    names = [n.strip() for v in values or [] for n in v.split(",") if n.strip()]
    bad = [n for n in names if n not in NAMES]
    if bad:
        raise ValueError(f"unknown --format {', '.join(bad)} (choose from {', '.join(NAMES)})")
    return list(dict.fromkeys(names))


def _until(result: dict) -> datetime | None:
    raw = result.get("hidden_until")
    if not raw:
        return None
    t = datetime.fromisoformat(raw[:-1] + "+00:00" if raw.endswith("Z") else raw)  # "Z": Python < 3.11
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def is_hidden(result: dict, test: dict, now: datetime) -> bool:
    if test.get("visibility", "visible") != "hidden":
        return False
    until = _until(result)
    return until is None or now < until


def student_tests(result: dict, now: datetime) -> list[dict]:
    """The tests as a student may see them now: hidden ones keep their points, lose name and message."""
    shown, k = [], 0
    for t in result["tests"]:
        if is_hidden(result, t, now):
            k += 1
            t = {**t, "name": f"隐藏测试 {k}", "message": HIDDEN_MSG}
        shown.append(t)
    return shown


def _summary(result: dict) -> str:
    skipped = result.get("skipped_points", 0)
    tail = f"（另有 {skipped:g} 分需要 GPU，未计入）" if skipped else ""
    notes = "".join(f"\n注意：{n}" for n in result.get("notes", []))
    return f"练习 {result['exercise']}：得分 {result['score']:g} / {result['max_score']:g}（{result['device']}）{tail}{notes}"


def gradescope(entry: Entry, now: datetime) -> dict:
    """Gradescope ``results.json`` (student-facing)."""
    r = entry.result
    if r is None:
        return {"score": 0.0, "output": f"无法评分：{entry.status.removeprefix('unusable: ')}", "output_format": "text",
                "tests": []}
    tests = []
    for t in student_tests(r, now):
        g = {"name": t["name"], "score": t["points"], "max_score": t["max_points"], "output": t["message"],
             "output_format": "text", "visibility": "visible"}
        if t["status"] == "skipped":  # not counted: no points possible on this device, no pass/fail
            g.update(name=f"{t['name']}（跳过）", max_score=0.0)
        else:
            g["status"] = "passed" if t["status"] == "passed" else "failed"
        tests.append(g)
    return {"score": r["score"], "execution_time": round(r["duration_s"]), "output": _summary(r),
            "output_format": "text", "tests": tests,
            "extra_data": {"exercise": r["exercise"], "device": r["device"]}}  # the seed stays with the instructor


def prairielearn(entry: Entry, now: datetime) -> dict:
    """PrairieLearn external-grading ``results.json`` (student-facing), at most :data:`PL_LIMIT` bytes."""
    r = entry.result
    if r is None:
        return {"gradable": False, "score": 0.0, "format_errors": [entry.status.removeprefix("unusable: ")]}
    tests = [{"name": t["name"], "points": t["points"], "max_points": 0.0 if t["status"] == "skipped" else t["max_points"],
              "message": t["status"], "output": t["message"]} for t in student_tests(r, now)]
    out = {"gradable": True, "score": round(r["score"] / r["max_score"], 6) if r["max_score"] else 0.0,
           "message": _summary(r), "output": "", "tests": tests}
    return _fit(out, PL_LIMIT)


def _fit(doc: dict, limit: int) -> dict:
    """Shorten the tests' outputs (head and tail kept) until the JSON is under ``limit`` bytes."""
    n = max((len(t["output"]) for t in doc["tests"]), default=0)
    while len(json.dumps(doc, ensure_ascii=False).encode()) > limit and n > 64:
        n //= 2
        for t in doc["tests"]:
            if len(t["output"]) > n:
                t["output"] = f"{t['output'][:n // 2]} … {t['output'][-(n // 2):]}"
    return doc


def junit(entries: list[Entry]) -> str:
    """JUnit XML for the whole batch (instructor-facing: every test by name)."""
    root = ET.Element("testsuites", name="triton-course grading")
    totals = {"tests": 0, "failures": 0, "errors": 0}
    for e in entries:
        suite = ET.SubElement(root, "testsuite", name=e.stem, file=e.file)
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        if e.result is None:
            case = ET.SubElement(suite, "testcase", name="load", classname=e.stem)
            ET.SubElement(case, "error", message=e.status, type="unusable").text = e.status
            counts.update(tests=1, errors=1)
        else:
            props = ET.SubElement(suite, "properties")
            for k in ("exercise", "score", "max_score", "device", "seed"):
                ET.SubElement(props, "property", name=k, value=str(e.result[k]))
            for t in e.result["tests"]:
                case = ET.SubElement(suite, "testcase", name=t["name"], classname=f"{e.result['exercise']}.{e.stem}")
                counts["tests"] += 1
                if t["status"] == "failed":
                    ET.SubElement(case, "failure", message=t["message"][:200], type="failed").text = t["message"]
                    counts["failures"] += 1
                elif t["status"] in ("error", "timeout", "crashed"):
                    ET.SubElement(case, "error", message=t["message"][:200], type=t["status"]).text = t["message"]
                    counts["errors"] += 1
                elif t["status"] == "skipped":
                    ET.SubElement(case, "skipped", message=t["message"])
                    counts["skipped"] += 1
            suite.set("time", f"{e.result['duration_s']:.3f}")
        for k, v in counts.items():
            suite.set(k, str(v))
        for k in totals:
            totals[k] += counts[k]
    for k, v in totals.items():
        root.set(k, str(v))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def spreadsheet_safe(value):
    """A text cell that a spreadsheet would run as a formula (``=``, ``+``, ``-``, ``@``, a tab or a CR first: a
    submission's file name is the learner's choice) gets a leading ``'``."""
    return "'" + value if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


def canvas_identity(file: str) -> tuple[str, str]:
    """(Student, Canvas user id) from a Canvas download name; (file stem, "") for any other name."""
    name = Path(file).name
    m = CANVAS_NAME.match(name)
    return (m["name"], m["uid"]) if m else (Path(file).stem, "")


def canvas_csv(entries: list[Entry]) -> str:
    """Canvas gradebook import: a column per exercise, a "Points Possible" row, a row per student.
    A student with several files for one exercise gets the best score."""
    exercises = sorted({e.result["exercise"] for e in entries if e.result})
    possible = {x: max(e.result["max_score"] for e in entries if e.result and e.result["exercise"] == x)
                for x in exercises}
    students: dict[tuple[str, str], dict[str, float]] = {}
    for e in entries:
        scores = students.setdefault(canvas_identity(e.file), {})
        if e.result:
            x = e.result["exercise"]
            scores[x] = max(scores.get(x, 0.0), e.result["score"])
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CANVAS_FIELDS + exercises)
    w.writerow(["Points Possible", "", "", "", ""] + [f"{possible[x]:g}" for x in exercises])
    for (name, uid), scores in sorted(students.items()):
        w.writerow([spreadsheet_safe(name), spreadsheet_safe(uid), "", "", ""]
                   + [f"{scores[x]:g}" if x in scores else "" for x in exercises])
    return buf.getvalue()


def write(names: list[str], out: Path, entries: list[Entry], now: datetime | None = None) -> list[Path]:
    """Write the chosen formats under ``out``; returns the files written."""
    now = now or datetime.now(timezone.utc)
    written = []
    for name in names:
        if name == "csv":
            written.append(_put(out / "canvas.csv", canvas_csv(entries)))
        elif name == "junit":
            written.append(_put(out / "junit.xml", junit(entries)))
        else:
            make = gradescope if name == "gradescope" else prairielearn
            for e in entries:
                if e.result is None and not e.status.startswith("unusable"):
                    continue  # a grader error or a failed task: nothing to tell the student yet
                doc = make(e, now)
                written.append(_put(out / name / f"{e.stem}.json", json.dumps(doc, ensure_ascii=False, indent=1) + "\n"))
    return written


def _put(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
