"""`python -m grader report`: the instructor's page, on a generated gradebook."""
from __future__ import annotations

import csv
import json
import re
import statistics
from pathlib import Path

import gradebook_fixtures as fx
from grader import batch, class_report, cli, registry


def test_report_page_has_every_part(tmp_path):
    folder = fx.gradebook(tmp_path / "gb", n=45, seed=3)
    assert cli.main(["report", str(folder), "--html", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert page.count("<h2 id='ex01_axpy'>") == page.count("<h2 id='ex02_softmax'>") == 1
    # per exercise: score distribution and failure rates; then the grading-time histogram
    assert len(re.findall(r"<img alt=\"\" src=\"data:image/png;base64,", page)) == 2 * 2 + 1
    for label in ("out-of-bounds write", "NaN left in the output", "outside tolerance", "timeout",
                  "crashed: the kernel process died"):
        assert f"<td>{label}" in page, label
    assert "broken.ipynb" in page and "unusable: 不是合法的 JSON" in page
    assert "Grading time per submission" in page and "median" in page
    # readable offline: nothing loaded from elsewhere, no scripts
    assert not re.search(r"(src|href)=['\"]?(https?:)?//", page) and "<script" not in page


def test_crashed_and_timed_out_submissions_are_listed(tmp_path):
    folder = fx.gradebook(tmp_path / "gb", n=30, seed=1)
    rows, results = class_report.load(folder)
    bad = {Path(f).name for f, r in results.items() if any(t["status"] in ("crashed", "timeout") for t in r["tests"])}
    assert bad
    section = class_report.page(rows, results, "t").split("<h2>Submissions that crashed or timed out</h2>")[1]
    section = section.split("<h2>")[0]
    assert {n for n in bad if n in section} == bad
    assert section.count("<tr>") == len(bad) + 1


def test_failure_rates_and_groups_are_counted_right(tmp_path):
    out = tmp_path / "gb"
    out.mkdir()
    results = [fx.result("ex01_axpy"), fx.result("ex01_axpy", {0: "oob", 1: "oob"}),
               fx.result("ex01_axpy", {0: "tol"}), fx.result("ex01_axpy")]
    rows = []
    for k, r in enumerate(results):
        f = f"/c/s{k}.ipynb"
        (out / f"{batch.stem_for(Path(f))}.json").write_text(json.dumps(r, ensure_ascii=False), encoding="utf-8")
        rows.append({"file": f, "exercise": r["exercise"], "score": r["score"], "max_score": r["max_score"],
                     "passed": 0, "tests": 0, "status": "incomplete", "duration_s": 5})
    with open(out / "gradebook.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=batch.FIELDS)
        w.writeheader()
        w.writerows(rows)
    page = class_report.page(*class_report.load(out), "t")
    first, second = (c.name for c in registry.get("ex01_axpy").cases_for("cuda", 0)[:2])
    assert f"<tr><td>{first}</td><td>50%</td><td>2</td><td>2</td>" in page  # s1 (oob) and s2 (tol)
    assert f"<tr><td>{second}</td><td>25%</td><td>3</td><td>1</td>" in page
    assert "<tr><td>out-of-bounds write (tl.store without mask)</td><td>1</td><td>2</td>" in page
    assert "<tr><td>outside tolerance</td><td>1</td><td>1</td>" in page
    median = statistics.median(r["score"] / r["max_score"] for r in results)  # 2 full, 2 points lost, 1 lost
    assert f"median score {100 * median:.0f}%, 2 with full marks (50%)" in page


def test_causes():
    msg = {k: {"status": s, "message": m.format(n=3)} for k, (s, m) in fx.MESSAGES.items()}
    assert class_report.cause(msg["oob"]).startswith("out-of-bounds write")
    assert class_report.cause(msg["nan"]).startswith("NaN left")
    assert class_report.cause(msg["tol"]) == "outside tolerance"
    assert class_report.cause({"status": "error", "message": "还没有实现：NotImplementedError"}).startswith("stub")
    undefined = ("out (7,), float32：kernel 读了还没有定义的内存 —— program (0, 0, 0) 读取了 out[0]；这块内存换成随机字节后"
                 "重放，out 的值变了。……（评分器平时填 NaN，这次重放换成了随机字节）")  # NaN and 重放 are in it too
    assert class_report.cause({"status": "failed", "message": undefined}).startswith("read memory nothing wrote")
    # an unknown message groups with its look-alikes: numbers do not split a group
    a = class_report.cause({"status": "failed", "message": "奇怪的 12 个结果"})
    assert a == class_report.cause({"status": "failed", "message": "奇怪的 7 个结果"}) == "other: 奇怪的 # 个结果"


def test_missing_gradebook_is_a_clear_error(tmp_path, capsys):
    assert cli.main(["report", str(tmp_path)]) == 2
    assert "has no gradebook.csv" in capsys.readouterr().err


def test_hidden_tests_of_all_runs_share_a_row():
    rs = [fx.result("ex01_axpy", {6: "oob"} if k else {}, hidden={6, 7}) for k in range(3)]
    for k, r in enumerate(rs):  # every run draws its own hidden sizes
        r["tests"][6]["name"], r["tests"][7]["name"] = f"n={1000 + k} float32", f"n={2000 + k} float16"
    page = class_report.exercise_section("ex01_axpy", [(f"/c/s{k}.ipynb", r) for k, r in enumerate(rs)])
    assert "<tr><td>n=# float32 (hidden, every size)</td><td>67%</td><td>1</td><td>2</td>" in page
    assert "<tr><td>n=# float16 (hidden, every size)</td><td>0%</td><td>3</td>" in page
    assert "n=1001 float32" not in page.split("Most common failures")[0]
