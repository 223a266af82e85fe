// tcourse browser panels: sliders over pictures whose every position was computed in Python.
// The same file runs in JupyterLab, VS Code, Colab and on the Quarto page: it needs no kernel,
// no server and no network. Python (tcourse/webviz.py) inlines it with the data of one panel.
(function () {
  "use strict";
  const NS = "http://www.w3.org/2000/svg";

  function svgEl(tag, attrs, parent) {
    const e = document.createElementNS(NS, tag);
    for (const k in attrs) if (attrs[k] !== undefined && attrs[k] !== null) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }

  function hatchPattern(svg, id) {
    const defs = svgEl("defs", {}, svg);
    const p = svgEl("pattern", {id: id, width: 6, height: 6, patternUnits: "userSpaceOnUse",
                                patternTransform: "rotate(45)"}, defs);
    svgEl("line", {x1: 0, y1: 0, x2: 0, y2: 6, stroke: "#444", "stroke-width": 1.2}, p);
  }

  // One shape of a scene (see tcourse/webviz.py Scene for the fields).
  function drawShape(g, s, hatch) {
    if (s.t === "r") {
      const r = svgEl("rect", {x: s.x, y: s.y, width: s.w, height: s.h, fill: s.fill || "none",
                               stroke: s.stroke, "stroke-width": s.sw, opacity: s.op}, g);
      if (s.tip) svgEl("title", {}, r).textContent = s.tip;
      if (s.hatch) svgEl("rect", {x: s.x, y: s.y, width: s.w, height: s.h, fill: "url(#" + hatch + ")"}, g);
    } else if (s.t === "t") {
      const t = svgEl("text", {x: s.x, y: s.y, "font-size": s.size || 12, "text-anchor": s.anchor || "start",
                               fill: s.color || "#222", "font-weight": s.bold ? "bold" : null,
                               "dominant-baseline": "middle",
                               transform: s.rot ? "rotate(" + s.rot + " " + s.x + " " + s.y + ")" : null}, g);
      t.textContent = s.s;
    } else if (s.t === "l") {
      svgEl("polyline", {points: s.pts.map(function (p) { return p.join(","); }).join(" "), fill: "none",
                         stroke: s.color || "#222", "stroke-width": s.w || 1.5,
                         "stroke-dasharray": s.dash || null}, g);
    } else if (s.t === "c") {
      const c = svgEl("circle", {cx: s.x, cy: s.y, r: s.r, fill: s.fill || "none", stroke: s.stroke,
                                 "stroke-width": s.sw}, g);
      if (s.tip) svgEl("title", {}, c).textContent = s.tip;
    } else if (s.t === "g") {  // grid, run-length encoded: v >= 0 -> pal[v % pal.length]; -2 masked; -1 empty
      let i = 0;
      s.runs.forEach(function (run) {
        const v = run[0], end = i + run[1];
        while (i < end) {  // one rect per cell when cells are big enough to show gaps, else per row segment
          const col = i % s.cols, n = s.gap ? 1 : Math.min(end - i, s.cols - col);
          if (v !== -1) {
            const x = s.x + col * s.cw, y = s.y + Math.floor(i / s.cols) * s.ch;
            const fill = v === -2 ? "#d9d9d9" : s.pal[v % s.pal.length];
            svgEl("rect", {x: x, y: y, width: n * s.cw, height: s.ch, fill: fill,
                           stroke: s.gap ? "#fff" : null, "stroke-width": s.gap || null}, g);
            if (v === -2) svgEl("rect", {x: x, y: y, width: n * s.cw, height: s.ch, fill: "url(#" + hatch + ")"}, g);
          }
          i += n;
        }
      });
    }
  }

  function keyOf(deps, chosen) {  // frames are stored under the chosen option indices, e.g. "2|0"
    return deps.map(function (d) { return chosen[d]; }).join("|");
  }

  function render(view, box, values, hatch) {
    box.textContent = "";
    if (view.kind === "text") {
      box.textContent = view.frames[keyOf(view.deps, values)];
      return;
    }
    const frames = view.layers.map(function (l) { return l.frames[keyOf(l.deps, values)]; });
    const w = frames[0].w, h = frames[0].h;
    const svg = svgEl("svg", {viewBox: "0 0 " + w + " " + h, width: w, height: h,
                              style: "max-width:100%;height:auto;font-family:sans-serif"}, box);
    hatchPattern(svg, hatch);
    frames.forEach(function (f) {
      const g = svgEl("g", {}, svg);
      f.items.forEach(function (s) { drawShape(g, s, hatch); });
    });
  }

  function mount(root, spec) {
    const values = {};
    // unique in the whole page: JupyterLab runs this file once per output, and a pattern id that is
    // also defined in a hidden output (another tab) would resolve there and not be drawn
    const hatch = root.id + "-hatch";
    const controls = document.createElement("div");
    controls.className = "tcp-controls";
    const stage = document.createElement("div");
    stage.className = "tcp-stage";
    stage.style.cssText = "display:flex;flex-wrap:wrap;gap:8px;align-items:flex-start";
    const boxes = spec.views.map(function (v) {
      const b = document.createElement(v.kind === "text" ? "pre" : "div");
      b.className = "tcp-view tcp-" + v.kind;
      if (v.kind === "text") b.style.cssText = "flex-basis:100%;margin:2px 0;white-space:pre-wrap;font-size:13px";
      stage.appendChild(b);
      return b;
    });
    function redraw() {
      spec.views.forEach(function (v, i) { render(v, boxes[i], values, hatch); });
    }
    spec.controls.forEach(function (c) {
      values[c.name] = c.index;
      const row = document.createElement("label");
      row.style.cssText = "display:flex;align-items:center;gap:10px;margin:2px 0;font:13px sans-serif";
      const name = document.createElement("span");
      name.textContent = c.label;
      name.style.cssText = "min-width:9em";
      const input = document.createElement("input");
      input.type = "range";
      input.min = 0;
      input.max = c.shown.length - 1;
      input.step = 1;
      input.value = c.index;
      input.name = c.name;
      input.style.cssText = "width:min(22em,60vw)";
      const shown = document.createElement("output");
      shown.textContent = c.shown[c.index];
      shown.style.cssText = "min-width:4em;font-weight:bold";
      input.addEventListener("input", function () {
        values[c.name] = +input.value;
        shown.textContent = c.shown[+input.value];
        redraw();
      });
      row.append(name, input, shown);
      controls.appendChild(row);
    });
    root.textContent = "";
    root.append(controls, stage);
    redraw();
  }

  window.tcoursePanel = window.tcoursePanel || {};
  window.tcoursePanel.mount = mount;
})();
