import json
import re
from pathlib import Path

import nbformat
import pytest

from tcourse import quiz

Q = quiz.Question("2+2?", ["3", "4", "5"], answer=1, explanation="Arithmetic.")
NB07 = Path(__file__).resolve().parent.parent / "notebooks" / "07_interview_review.ipynb"
QUIZ_CALL = re.compile(r'quiz\.show\("(\w+)", "(\w+)"\)')


def test_grade():
    assert quiz.grade(Q, 1) == (True, "✓ 正确。Arithmetic.")
    ok, text = quiz.grade(Q, 0)
    assert not ok and "B. 4" in text and "Arithmetic." in text
    assert quiz.grade(Q, None)[0] is False


def test_answer_index_is_validated():
    with pytest.raises(ValueError):
        quiz.Question("?", ["a"], answer=1, explanation="")


def test_the_page_gets_feedback_per_option_but_no_answer_field():
    spec = quiz.Quiz([Q]).spec()
    (q,) = spec["questions"]
    assert q["options"] == ["A. 3", "B. 4", "C. 5"]
    assert [f["ok"] for f in q["feedback"]] == [False, True, False]
    assert "answer" not in q and "explanation" not in q  # only what a checked choice shows
    html = quiz.Quiz([Q])._repr_html_()
    assert "window.tcourseQuiz" in html and "<script src" not in html


def test_chapter7_quiz_cells_load_banks_and_hide_the_answers():
    """The quiz cells name a bank section; no answer or explanation text is in the notebook."""
    nb = nbformat.read(NB07, as_version=4)
    calls = [m.groups() for c in nb.cells if c.cell_type == "code" for m in QUIZ_CALL.finditer(c.source)]
    assert len(calls) >= 5
    text = "\n".join(c.source for c in nb.cells)
    for chapter, section in calls:
        qs = quiz.load(chapter, section)
        assert qs
        for q in qs:
            assert q.explanation not in text
    bank = json.loads((quiz.BANKS / "ch07.json").read_text(encoding="utf-8"))
    assert sorted(s for _, s in calls) == sorted(bank)  # every section is shown once
