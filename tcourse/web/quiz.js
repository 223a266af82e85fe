// tcourse quizzes: choose an option, press 检查, read the feedback. The answers and explanations
// come with the data (computed by tcourse/quiz.py) and stay out of sight until a choice is checked.
(function () {
  "use strict";
  function mount(root, spec) {
    root.textContent = "";
    spec.questions.forEach(function (q, qi) {
      const box = document.createElement("fieldset");
      box.className = "tcq-question";
      box.style.cssText = "border:1px solid #ccc;border-radius:6px;margin:8px 0;padding:6px 12px;font:14px sans-serif";
      const title = document.createElement("legend");
      title.textContent = (qi + 1) + ". " + q.prompt;
      title.style.fontWeight = "bold";
      box.appendChild(title);
      const group = spec.id + "-q" + qi;
      q.options.forEach(function (o, oi) {
        const row = document.createElement("label");
        row.style.cssText = "display:block;margin:2px 0;cursor:pointer";
        const radio = document.createElement("input");
        radio.type = "radio";
        radio.name = group;
        radio.value = oi;
        row.append(radio, " " + o);
        box.appendChild(row);
      });
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = "检查";
      button.style.cssText = "margin:4px 0;padding:2px 12px";
      const feedback = document.createElement("div");
      feedback.className = "tcq-feedback";
      feedback.style.margin = "4px 0";
      button.addEventListener("click", function () {
        const picked = box.querySelector("input:checked");
        const f = picked ? q.feedback[+picked.value] : {ok: false, text: spec.none};
        feedback.textContent = f.text;
        feedback.style.color = f.ok ? "green" : "#b00";
      });
      box.append(button, feedback);
      root.appendChild(box);
    });
  }
  window.tcourseQuiz = window.tcourseQuiz || {};
  window.tcourseQuiz.mount = mount;
})();
