"""Self-check quizzes: ipywidgets in Jupyter, the same questions as markdown for the static site.

    qs = [quiz.Question("...", ["A", "B", "C"], answer=1, explanation="...")]
    quiz.show(qs)                 # RadioButtons + 检查 button + explanation, per question
    print(quiz.as_markdown(qs))   # what the markdown cell under it contains (<details> answers)
"""
from __future__ import annotations

import html
from dataclasses import dataclass

LETTERS = "ABCDEFGH"


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
        return False, "先选一个选项。"
    right = f"{LETTERS[q.answer]}. {q.options[q.answer]}"
    if choice == q.answer:
        return True, f"✓ 正确。{q.explanation}"
    return False, f"✗ 不对（你选了 {LETTERS[choice]}）。正确答案：{right}。{q.explanation}"


def widget(q: Question, number: int = 1):
    """One question: prompt, RadioButtons, a 检查 button and an HTML area for the feedback."""
    import ipywidgets as w

    prompt = w.HTML(f"<b>{number}. {html.escape(q.prompt)}</b>")
    radio = w.RadioButtons(options=[(f"{LETTERS[i]}. {o}", i) for i, o in enumerate(q.options)], value=None,
                           layout=w.Layout(width="auto"))
    button = w.Button(description="检查", button_style="info")
    feedback = w.HTML("")

    def on_click(_):
        ok, text = grade(q, radio.value)
        color = "green" if ok else "#b00"
        feedback.value = f"<span style='color:{color}'>{html.escape(text)}</span>"

    button.on_click(on_click)
    box = w.VBox([prompt, radio, button, feedback])
    box.radio, box.button, box.feedback = radio, button, feedback  # handles for tests
    return box


def show(questions) -> object:
    """Display every question of one section's quiz; returns the container."""
    import ipywidgets as w
    from IPython.display import display

    box = w.VBox([widget(q, i + 1) for i, q in enumerate(questions)])
    display(box)
    return box


def as_markdown(questions, title: str = "小测（静态版）") -> str:
    """The quiz as markdown: options listed, answer and explanation in a collapsed <details>."""
    lines = [f"**{title}**", ""]
    for i, q in enumerate(questions, 1):
        lines.append(f"{i}. {q.prompt}")
        lines += [f"   - {LETTERS[j]}. {o}" for j, o in enumerate(q.options)]
        lines += ["", f"   <details><summary>答案与解析</summary>", "",
                  f"   **{LETTERS[q.answer]}**。{q.explanation}", "", "   </details>", ""]
    return "\n".join(lines).rstrip() + "\n"
