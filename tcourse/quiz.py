"""Self-check quizzes that run in the browser: in JupyterLab, VS Code, Colab and on the course's web
pages alike, with no kernel. The questions live in ``tcourse/quizzes/<chapter>.json`` so the answers
are not in the notebook's code; the page gets them inline and shows one only after a choice is checked.

    quiz.show("ch07", "programs")   # the questions of one section: radio buttons + 检查 + feedback
"""
from __future__ import annotations

import html
import json
import uuid
from dataclasses import dataclass
from pathlib import Path

LETTERS = "ABCDEFGH"
BANKS = Path(__file__).with_name("quizzes")
JS = Path(__file__).with_name("web") / "quiz.js"
NOTHING_CHOSEN = "先选一个选项。"


@dataclass(frozen=True)
class Question:
    prompt: str
    options: tuple
    answer: int  # index into options
    explanation: str

    def __post_init__(self):
        object.__setattr__(self, "options", tuple(self.options))
        if not 0 <= self.answer < len(self.options):
            raise ValueError(f"answer {self.answer} is not an option index (0..{len(self.options) - 1})")


def grade(q: Question, choice: int | None) -> tuple[bool, str]:
    """(correct?, feedback text) for the option index ``choice`` (None: nothing selected)."""
    if choice is None:
        return False, NOTHING_CHOSEN
    right = f"{LETTERS[q.answer]}. {q.options[q.answer]}"
    if choice == q.answer:
        return True, f"✓ 正确。{q.explanation}"
    return False, f"✗ 不对（你选了 {LETTERS[choice]}）。正确答案：{right}。{q.explanation}"


def load(chapter: str, section: str) -> list[Question]:
    bank = json.loads((BANKS / f"{chapter}.json").read_text(encoding="utf-8"))
    return [Question(**q) for q in bank[section]]


class Quiz:
    """The questions of one section as a browser quiz (``_repr_html_``)."""

    def __init__(self, questions):
        self.questions = list(questions)

    def __repr__(self) -> str:
        return f"quiz.Quiz({len(self.questions)} questions)"

    def spec(self) -> dict:
        return {"none": NOTHING_CHOSEN, "questions": [
            {"prompt": q.prompt, "options": [f"{LETTERS[i]}. {o}" for i, o in enumerate(q.options)],
             "feedback": [dict(zip(("ok", "text"), grade(q, i))) for i in range(len(q.options))]}
            for q in self.questions]}

    def _repr_html_(self) -> str:
        qid = f"tcq-{uuid.uuid4().hex[:12]}"
        data = json.dumps({"id": qid, **self.spec()}, ensure_ascii=False).replace("</", "<\\/")
        return (f'<div class="tcourse-quiz" id="{qid}">'
                f'<div class="tcq-fallback">{html.escape("小测需要 JavaScript：在 JupyterLab 里运行本单元，或打开课程网页。")}</div>'
                f'<script type="application/json" class="tcq-data">{data}</script>'
                f"<script>{JS.read_text(encoding='utf-8')}\n"
                "(function (s) { var root = s.parentNode;"
                " window.tcourseQuiz.mount(root, JSON.parse(root.querySelector('.tcq-data').textContent));"
                " })(document.currentScript);</script></div>")


def show(chapter: str, section: str) -> Quiz:
    """Display the quiz of ``section`` from ``quizzes/<chapter>.json``."""
    from IPython.display import display

    q = Quiz(load(chapter, section))
    display(q)
    return q
