from pathlib import Path

import nbformat
import pytest

from tcourse import quiz

Q = quiz.Question("2+2?", ["3", "4", "5"], answer=1, explanation="Arithmetic.")
NB07 = Path(__file__).resolve().parent.parent / "notebooks" / "07_interview_review.ipynb"


def test_grade():
    assert quiz.grade(Q, 1) == (True, "✓ 正确。Arithmetic.")
    ok, text = quiz.grade(Q, 0)
    assert not ok and "B. 4" in text and "Arithmetic." in text
    assert quiz.grade(Q, None)[0] is False


def test_answer_index_is_validated():
    with pytest.raises(ValueError):
        quiz.Question("?", ["a"], answer=1, explanation="")


def test_widget_click_shows_feedback():
    box = quiz.widget(Q)
    box.button.click()
    assert "先选" in box.feedback.value
    box.radio.value = 2
    box.button.click()
    assert "✗" in box.feedback.value and "Arithmetic." in box.feedback.value
    box.radio.value = 1
    box.button.click()
    assert "✓" in box.feedback.value


def test_markdown_has_collapsed_answers():
    text = quiz.as_markdown([Q, Q])
    assert text.count("<details>") == 2 and text.count("</details>") == 2
    assert "**B**。Arithmetic." in text and "   - C. 5" in text


def test_chapter7_static_quizzes_match_the_widgets():
    """Each quiz code cell is followed by a markdown cell equal to quiz.as_markdown(qs) of that cell."""
    nb = nbformat.read(NB07, as_version=4)
    pairs = [(c, nb.cells[i + 1]) for i, c in enumerate(nb.cells) if c.cell_type == "code" and "quiz.show(qs)" in c.source]
    assert len(pairs) >= 5
    for cell, after in pairs:
        ns = {}
        exec(cell.source.replace("quiz.show(qs);", ""), ns)
        assert after.cell_type == "markdown"
        assert after.source.strip() == quiz.as_markdown(ns["qs"]).strip()
