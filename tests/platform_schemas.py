"""Checks of the files the grader writes for LMS/autograder platforms, written from their documentation
(no network at test time). Each check returns a list of problems; empty means the file conforms.

- Gradescope autograder ``results.json`` (gradescope-autograders.readthedocs.io, "Autograder
  Specifications"): top-level ``score`` (required unless every test has one), ``execution_time``
  (seconds), ``output``, ``output_format``, ``visibility``, ``stdout_visibility``, ``extra_data``,
  ``tests``; each test: ``score``, ``max_score``, ``status`` ("passed"/"failed"), ``name``,
  ``name_format``, ``number``, ``output``, ``output_format``, ``tags``, ``visibility``, ``extra_data``.
  Visibility is one of hidden, after_due_date, after_published, visible; formats text, html,
  simple_format, md, ansi.
- PrairieLearn external grading ``results.json`` (prairielearn.readthedocs.io, "External Grading",
  "Grading results"): ``score`` in [0.0, 1.0] when gradable; ``gradable`` boolean (false: invalid
  input, then ``format_errors`` is a string or a list of strings); ``message``, ``output``, ``images``,
  ``tests[{name, description, points, max_points, message, output, images}]``; at most 1 MB.
- JUnit XML (the Ant/Jenkins/Surefire ``junit-10.xsd`` shape): ``<testsuites>`` of ``<testsuite>``
  with required ``name``, ``tests``, ``failures``, ``errors`` (and optional ``skipped``, ``time``...);
  ``<testcase>`` with required ``name`` and optional ``classname``/``time``; its children are
  ``skipped``/``error``/``failure``/``system-out``/``system-err``; ``<properties>`` hold
  ``<property name value>``.
- Canvas gradebook import CSV (Canvas guides, "How do I import grades in the Gradebook?"): the
  columns Student, ID, SIS User ID, SIS Login ID, Section, then one column per assignment; an
  optional "Points Possible" row; scores are numbers or empty.
"""
from __future__ import annotations

import csv
import io
import json
import re
import xml.etree.ElementTree as ET

GS_VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}
GS_FORMATS = {"text", "html", "simple_format", "md", "ansi"}
GS_TOP = {"score", "execution_time", "output", "output_format", "test_output_format", "test_name_format",
          "visibility", "stdout_visibility", "extra_data", "tests", "leaderboard"}
GS_TEST = {"score", "max_score", "status", "name", "name_format", "number", "output", "output_format", "tags",
           "visibility", "extra_data"}
PL_TOP = {"gradable", "score", "format_errors", "message", "output", "images", "tests"}
PL_TEST = {"name", "description", "points", "max_points", "message", "output", "images"}
PL_LIMIT = 1_000_000
JUNIT_TIME = re.compile(r"^(([0-9]{0,3},)*[0-9]{3}|[0-9]{0,3})*(\.[0-9]{0,3})?$")
TESTCASE_CHILDREN = {"skipped", "error", "failure", "system-out", "system-err"}
CANVAS_HEAD = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]


def _num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def check_gradescope(doc) -> list[str]:
    if not isinstance(doc, dict):
        return ["results.json is not an object"]
    p = [f"unknown top-level key {k!r}" for k in doc if k not in GS_TOP]
    tests = doc.get("tests", [])
    if not isinstance(tests, list):
        return p + ["tests is not a list"]
    if "score" not in doc and not (tests and all("score" in t for t in tests if isinstance(t, dict))):
        p.append("no top-level score and not every test has one")
    if "score" in doc and not _num(doc["score"]):
        p.append("score is not a number")
    if "execution_time" in doc and not _num(doc["execution_time"]):
        p.append("execution_time is not a number (seconds)")
    for k in ("output",):
        if k in doc and not isinstance(doc[k], str):
            p.append(f"{k} is not a string")
    for k in ("output_format", "test_output_format", "test_name_format"):
        if k in doc and doc[k] not in GS_FORMATS:
            p.append(f"{k} {doc[k]!r} is not one of {sorted(GS_FORMATS)}")
    for k in ("visibility", "stdout_visibility"):
        if k in doc and doc[k] not in GS_VISIBILITY:
            p.append(f"{k} {doc[k]!r} is not one of {sorted(GS_VISIBILITY)}")
    if "extra_data" in doc and not isinstance(doc["extra_data"], dict):
        p.append("extra_data is not an object")
    probs, objects = _tests(tests, GS_TEST, ("score", "max_score"), ("name", "output", "number"))
    p += probs
    for i, t in objects:
        if "status" in t and t["status"] not in ("passed", "failed"):
            p.append(f"tests[{i}].status {t['status']!r} is not passed/failed")
        for k in ("name_format", "output_format"):
            if k in t and t[k] not in GS_FORMATS:
                p.append(f"tests[{i}].{k} {t[k]!r} is not a known format")
        if "visibility" in t and t["visibility"] not in GS_VISIBILITY:
            p.append(f"tests[{i}].visibility {t['visibility']!r} is not a known visibility")
        if "tags" in t and not (isinstance(t["tags"], list) and all(isinstance(x, str) for x in t["tags"])):
            p.append(f"tests[{i}].tags is not a list of strings")
    return p


def check_prairielearn(text: str) -> list[str]:
    """``text``: the file's content (the 1 MB limit is on the file)."""
    p = [f"results.json is {len(text.encode())} bytes, over PrairieLearn's 1 MB"] if len(text.encode()) > PL_LIMIT else []
    doc = json.loads(text)
    if not isinstance(doc, dict):
        return p + ["results.json is not an object"]
    p += [f"unknown top-level key {k!r}" for k in doc if k not in PL_TOP]
    gradable = doc.get("gradable", True)
    if not isinstance(gradable, bool):
        p.append("gradable is not a boolean")
    if gradable:
        if "score" not in doc:
            p.append("a gradable result needs a score")
        elif not (_num(doc["score"]) and 0.0 <= doc["score"] <= 1.0):
            p.append(f"score {doc['score']!r} is not a number in [0, 1]")
    elif "format_errors" in doc:
        fe = doc["format_errors"]
        if not (isinstance(fe, str) or (isinstance(fe, list) and all(isinstance(x, str) for x in fe))):
            p.append("format_errors is neither a string nor a list of strings")
    for k in ("message", "output"):
        if k in doc and not isinstance(doc[k], str):
            p.append(f"{k} is not a string")
    probs, objects = _tests(doc.get("tests", []), PL_TEST, ("points", "max_points"),
                            ("name", "description", "message", "output"))
    p += probs
    for i, t in objects:
        if _num(t.get("points")) and _num(t.get("max_points")) and not 0 <= t["points"] <= t["max_points"] + 1e-9:
            p.append(f"tests[{i}]: points {t['points']} outside [0, max_points {t['max_points']}]")
    return p


def _tests(tests: list, keys: set[str], numbers: tuple[str, ...], strings: tuple[str, ...]):
    """What every platform's test list asks: objects, known keys, numbers and strings where they go.
    Returns (problems, [(index, test) for the tests that are objects])."""
    p, objects = [], []
    for i, t in enumerate(tests):
        if not isinstance(t, dict):
            p.append(f"tests[{i}] is not an object")
            continue
        objects.append((i, t))
        p += [f"tests[{i}]: unknown key {k!r}" for k in t if k not in keys]
        p += [f"tests[{i}].{k} is not a number" for k in numbers if k in t and not _num(t[k])]
        p += [f"tests[{i}].{k} is not a string" for k in strings if k in t and not isinstance(t[k], str)]
    return p, objects


def _int_attr(el, name: str, required: bool) -> tuple[int | None, list[str]]:
    if name not in el.attrib:
        return None, ([f"<{el.tag} name={el.get('name')!r}> lacks required {name}"] if required else [])
    try:
        return int(el.get(name)), []
    except ValueError:
        return None, [f"<{el.tag}> {name}={el.get(name)!r} is not an integer"]


def check_junit(text: str) -> list[str]:
    try:
        root = ET.fromstring(text)
    except ET.ParseError as e:
        return [f"not well-formed XML: {e}"]
    if root.tag != "testsuites":
        return [f"root element is <{root.tag}>, not <testsuites>"]
    p = []
    totals = {"tests": 0, "failures": 0, "errors": 0}
    for suite in root:
        if suite.tag != "testsuite":
            p.append(f"<testsuites> holds <{suite.tag}>")
            continue
        if "name" not in suite.attrib:
            p.append("a <testsuite> lacks its name")
        counted = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        for child in suite:
            if child.tag == "properties":
                p += [f"<properties> holds <{q.tag}> or a property without name/value" for q in child
                      if q.tag != "property" or not {"name", "value"} <= q.attrib.keys()]
            elif child.tag == "testcase":
                if "name" not in child.attrib:
                    p.append("a <testcase> lacks its name")
                if "time" in child.attrib and not JUNIT_TIME.match(child.get("time")):
                    p.append(f"testcase time {child.get('time')!r} is not a duration")
                kinds = [q.tag for q in child]
                p += [f"<testcase> holds <{k}>" for k in kinds if k not in TESTCASE_CHILDREN]
                verdicts = [k for k in kinds if k in ("failure", "error", "skipped")]
                if len(verdicts) > 1:
                    p.append(f"testcase {child.get('name')!r} has several verdicts {verdicts}")
                counted["tests"] += 1
                for k, key in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
                    counted[key] += k in verdicts
            elif child.tag not in ("system-out", "system-err", "testsuite"):
                p.append(f"<testsuite> holds <{child.tag}>")
        for key in ("tests", "failures", "errors", "skipped"):
            v, probs = _int_attr(suite, key, required=key != "skipped")
            p += probs
            if v is not None and v != counted[key]:
                p.append(f"testsuite {suite.get('name')!r}: {key}={v} but it holds {counted[key]}")
        if "time" in suite.attrib and not JUNIT_TIME.match(suite.get("time")):
            p.append(f"testsuite time {suite.get('time')!r} is not a duration")
        for k in totals:
            totals[k] += counted[k]
    for key, want in totals.items():
        v, probs = _int_attr(root, key, required=False)
        p += probs
        if v is not None and v != want:
            p.append(f"<testsuites> {key}={v} but its suites hold {want}")
    return p


def check_canvas_csv(text: str) -> list[str]:
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or rows[0][:5] != CANVAS_HEAD:
        return [f"the header must start with {CANVAS_HEAD}"]
    head, p = rows[0], []
    if len(head) == 5:
        p.append("no assignment column")
    if len(set(head)) != len(head):
        p.append("duplicate column names")
    for n, row in enumerate(rows[1:], start=2):
        if len(row) != len(head):
            p.append(f"row {n} has {len(row)} fields, the header {len(head)}")
            continue
        if n == 2 and row[0].strip() == "Points Possible":
            p += [f"Points Possible for {h!r} is not a number" for h, v in zip(head[5:], row[5:]) if not _is_num(v)]
            continue
        if not row[0] and not any(row[1:4]):
            p.append(f"row {n} names no student (Student, ID, SIS User ID or SIS Login ID)")
        p += [f"row {n}: {h!r} = {v!r} is not a number" for h, v in zip(head[5:], row[5:]) if v and not _is_num(v)]
    return p


def _is_num(v: str) -> bool:
    try:
        float(v)
        return True
    except ValueError:
        return False
