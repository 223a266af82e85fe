#!/usr/bin/env python3
"""结构校验：检查 .excalidraw 文件能被 Excalidraw 正常打开、编辑。

Rules (each problem string starts with its rule name in brackets):

  [json]       the file is valid JSON with type "excalidraw", a version and an elements list
  [fields]     every element has the fields its type needs, with the right value types
  [finite]     every coordinate, size and point is a finite number (no NaN / Infinity)
  [unique-id]  element ids are unique
  [container]  text.containerId <-> container.boundElements resolve both ways
  [binding]    arrow start/endBinding <-> target.boundElements resolve both ways
  [bound-list] every boundElements entry points at an element that points back
  [label-fit]  a bound label lies inside its container
  [overlap]    no two labels overlap (inside a box or anywhere else)

Usage: python diagrams/validate_excalidraw.py [FILE_OR_DIR ...]   (default: diagrams/)
Importable: validate(doc) -> list[str], validate_text(text) -> list[str].  Standard library only.
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

SHAPES = {"rectangle", "ellipse", "diamond"}
LINEAR = {"arrow", "line"}
KNOWN_TYPES = SHAPES | LINEAR | {"text", "freedraw", "image", "frame", "magicframe", "embeddable", "iframe"}
FONT_FAMILIES = {1, 2, 3, 4, 5, 6, 7, 8, 9}
NUMBER = (int, float)

COMMON = {
    "id": str, "type": str, "x": NUMBER, "y": NUMBER, "width": NUMBER, "height": NUMBER,
    "angle": NUMBER, "strokeColor": str, "backgroundColor": str, "fillStyle": str,
    "strokeWidth": NUMBER, "strokeStyle": str, "roughness": NUMBER, "opacity": NUMBER,
    "groupIds": list, "seed": int, "version": int, "versionNonce": int, "isDeleted": bool,
    "locked": bool,
}
TEXT = {
    "text": str, "originalText": str, "fontSize": NUMBER, "fontFamily": int, "textAlign": str,
    "verticalAlign": str, "lineHeight": NUMBER,
}
LINEAR_FIELDS = {"points": list}


def _is_num(v) -> bool:
    return isinstance(v, NUMBER) and not isinstance(v, bool)


def _type_ok(v, want) -> bool:
    if want is NUMBER:
        return _is_num(v)
    if want is int:
        return isinstance(v, int) and not isinstance(v, bool)
    return isinstance(v, want)


def _bbox(e):
    return e["x"], e["y"], e["x"] + e["width"], e["y"] + e["height"]


def validate(doc) -> list[str]:
    """Return a list of problems; an empty list means the scene is structurally sound."""
    errs: list[str] = []
    if not isinstance(doc, dict):
        return ["[json] top level is not an object"]
    if doc.get("type") != "excalidraw":
        errs.append(f"[json] top-level type is {doc.get('type')!r}, expected 'excalidraw'")
    if not _type_ok(doc.get("version"), int):
        errs.append("[json] top-level version missing or not an integer")
    els = doc.get("elements")
    if not isinstance(els, list):
        return errs + ["[json] elements is not a list"]

    # -- per element: fields, types, finiteness ---------------------------------
    good = []
    for i, e in enumerate(els):
        if not isinstance(e, dict):
            errs.append(f"[fields] element #{i} is not an object")
            continue
        name = f"{e.get('id', f'#{i}')}({e.get('type')})"
        need = dict(COMMON)
        if e.get("type") == "text":
            need.update(TEXT)
        if e.get("type") in LINEAR:
            need.update(LINEAR_FIELDS)
        bad = False
        for k, t in need.items():
            if k not in e:
                errs.append(f"[fields] {name}: missing {k}")
                bad = True
            elif not _type_ok(e[k], t):
                errs.append(f"[fields] {name}: {k} has type {type(e[k]).__name__}")
                bad = True
        if e.get("type") not in KNOWN_TYPES:
            errs.append(f"[fields] {name}: unknown type")
            bad = True
        if "boundElements" in e and e["boundElements"] is not None and not isinstance(e["boundElements"], list):
            errs.append(f"[fields] {name}: boundElements is neither a list nor null")
            bad = True
        for k in ("x", "y", "width", "height", "angle", "strokeWidth", "opacity"):
            if _is_num(e.get(k)) and not math.isfinite(e[k]):
                errs.append(f"[finite] {name}: {k} = {e[k]}")
                bad = True
        if e.get("type") == "text":
            if not e.get("text"):
                errs.append(f"[fields] {name}: empty text")
            if _is_num(e.get("fontSize")) and not (math.isfinite(e["fontSize"]) and e["fontSize"] > 0):
                errs.append(f"[finite] {name}: fontSize = {e['fontSize']}")
                bad = True
            if e.get("fontFamily") not in FONT_FAMILIES:
                errs.append(f"[fields] {name}: unknown fontFamily {e.get('fontFamily')!r}")
            if "containerId" in e and e["containerId"] is not None and not isinstance(e["containerId"], str):
                errs.append(f"[fields] {name}: containerId is neither a string nor null")
                bad = True
        if e.get("type") in LINEAR and isinstance(e.get("points"), list):
            pts = e["points"]
            if len(pts) < 2:
                errs.append(f"[fields] {name}: fewer than 2 points")
            for p in pts:
                if not (isinstance(p, list) and len(p) >= 2 and all(_is_num(c) for c in p[:2])):
                    errs.append(f"[fields] {name}: malformed point {p!r}")
                    bad = True
                elif not all(math.isfinite(c) for c in p[:2]):
                    errs.append(f"[finite] {name}: non-finite point {p!r}")
                    bad = True
            for end in ("startBinding", "endBinding"):
                b = e.get(end)
                if b is None:
                    continue
                if not (isinstance(b, dict) and isinstance(b.get("elementId"), str)):
                    errs.append(f"[fields] {name}: {end} is malformed")
                    bad = True
                    continue
                for k in ("focus", "gap"):
                    if k in b and not (_is_num(b[k]) and math.isfinite(b[k])):
                        errs.append(f"[finite] {name}: {end}.{k} = {b[k]!r}")
        if not bad:
            good.append(e)

    # -- ids ------------------------------------------------------------------
    by_id: dict[str, dict] = {}
    for e in good:
        if e["id"] in by_id:
            errs.append(f"[unique-id] duplicate id {e['id']!r}")
        by_id[e["id"]] = e
    live = {k: e for k, e in by_id.items() if not e["isDeleted"]}

    def listed(container, eid, etype):
        return any(isinstance(b, dict) and b.get("id") == eid and b.get("type") == etype
                   for b in (container.get("boundElements") or []))

    # -- text <-> container -------------------------------------------------------
    for e in live.values():
        if e["type"] != "text" or not e.get("containerId"):
            continue
        c = live.get(e["containerId"])
        if c is None:
            errs.append(f"[container] text {e['id']}: container {e['containerId']!r} does not exist")
        elif not listed(c, e["id"], "text"):
            errs.append(f"[container] text {e['id']}: container {c['id']} does not list it in boundElements")
        else:
            x0, y0, x1, y1 = _bbox(e)
            cx0, cy0, cx1, cy1 = _bbox(c)
            tol = 0.5
            if x0 < cx0 - tol or y0 < cy0 - tol or x1 > cx1 + tol or y1 > cy1 + tol:
                errs.append(f"[label-fit] text {e['id']} sticks out of its container {c['id']}")

    # -- arrow <-> shape -----------------------------------------------------------
    for e in live.values():
        if e["type"] not in LINEAR:
            continue
        for end in ("startBinding", "endBinding"):
            b = e.get(end)
            if not b:
                continue
            t = live.get(b["elementId"])
            if t is None:
                errs.append(f"[binding] arrow {e['id']}: {end} target {b['elementId']!r} does not exist")
            elif not listed(t, e["id"], "arrow"):
                errs.append(f"[binding] arrow {e['id']}: {end} target {t['id']} does not list it in boundElements")

    # -- boundElements entries point back -------------------------------------------
    for c in live.values():
        texts = 0
        for b in c.get("boundElements") or []:
            if not (isinstance(b, dict) and isinstance(b.get("id"), str)):
                errs.append(f"[bound-list] {c['id']}: malformed boundElements entry {b!r}")
                continue
            t = live.get(b["id"])
            if t is None:
                errs.append(f"[bound-list] {c['id']}: lists missing element {b['id']!r}")
            elif b.get("type") == "text":
                texts += 1
                if t.get("containerId") != c["id"]:
                    errs.append(f"[bound-list] {c['id']}: lists text {t['id']} whose containerId is not {c['id']}")
            elif b.get("type") == "arrow":
                ends = {(t.get(k) or {}).get("elementId") for k in ("startBinding", "endBinding")}
                if c["id"] not in ends:
                    errs.append(f"[bound-list] {c['id']}: lists arrow {t['id']} that is not bound to it")
            else:
                errs.append(f"[bound-list] {c['id']}: entry {b['id']} has unknown type {b.get('type')!r}")
        if texts > 1:
            errs.append(f"[bound-list] {c['id']}: has {texts} bound labels (Excalidraw allows one)")

    # -- labels do not overlap -------------------------------------------------------
    texts = [e for e in live.values() if e["type"] == "text"]
    for i, s in enumerate(texts):
        sx0, sy0, sx1, sy1 = _bbox(s)
        for t in texts[i + 1:]:
            tx0, ty0, tx1, ty1 = _bbox(t)
            if sx0 < tx1 and tx0 < sx1 and sy0 < ty1 and ty0 < sy1:
                errs.append(f"[overlap] labels {s['id']} and {t['id']} overlap")
    return errs


def validate_text(text: str) -> list[str]:
    try:
        doc = json.loads(text, parse_constant=lambda c: float(c))
    except json.JSONDecodeError as exc:
        return [f"[json] not valid JSON: {exc}"]
    return validate(doc)


def iter_files(paths):
    for p in map(Path, paths):
        if p.is_dir():
            yield from sorted(p.glob("*.excalidraw"))
        else:
            yield p


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    files = list(iter_files(args or [Path(__file__).resolve().parent]))
    if not files:
        print("no .excalidraw files found", file=sys.stderr)
        return 2
    failed = 0
    for f in files:
        errs = validate_text(f.read_text(encoding="utf-8"))
        print(f"{'ok     ' if not errs else 'PROBLEM'} {f}")
        for e in errs:
            print(f"  {e}")
        failed += bool(errs)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
