"""Write the H200 appendix's tables from the recorded JSON files, without running any kernel.

    python scripts/build_appendix.py           # rewrite site-assets/_h200_results.md
    python scripts/build_appendix.py --check   # exit 1 if that file is out of date

The Quarto site renders with execution off, so the appendix cannot compute its tables at render
time: this script turns ``results/h200/*.json`` (the ``tcourse.recorded`` format
``{"name", "meta": {device, date, torch, triton, driver, ...}, "data": ...}``, or any other JSON
document such as the benchmark suite's) into markdown that ``appendix_h200.qmd`` includes.
Each file is summarised (at most MAX_ROWS rows of MAX_COLS columns, nested data one level deep) and
linked: the JSON files are copied into the site (``project.resources``), so the full data is one click
away. Plots saved next to the JSON files (``*.png``/``*.svg``) are shown too. Run it after recording,
then ``quarto render``. The output depends only on the files' contents (sorted, no timestamps),
so tests/test_site.py can check that it is in sync.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = ROOT / "results" / "h200"
OUTPUT = ROOT / "site-assets" / "_h200_results.md"

ENV_KEYS = ("device", "capability", "sm_count", "driver", "date", "python", "torch", "triton", "numpy")
ENV_HEADERS = ("设备", "compute capability", "SM", "driver", "日期", "python", "torch", "triton", "numpy")
MAX_ROWS = 12           # longer tables are cut, with a note pointing at the JSON file
MAX_COLS = 8            # wider tables keep their first columns, with the same note
SUMMARY_COLS = ("family", "case", "baseline", "unit", "ours", "torch", "speedup", "target", "met")
MAX_LIST_IN_CELL = 8    # longer lists inside a cell are summarised
MAX_TEXT_IN_CELL = 60   # longer text (captured source code, logs) is cut, with its length


def fmt(v) -> str:
    """One table cell: floats to 4 significant digits (whole numbers from 1000 up), short lists inline,
    text escaped for a markdown table."""
    if v is None:
        s = "—"
    elif isinstance(v, bool):
        s = "true" if v else "false"
    elif isinstance(v, float):
        s = f"{v:.0f}" if abs(v) >= 1000 else f"{v:.4g}"
    elif isinstance(v, int):
        s = str(v)
    elif isinstance(v, list):
        if len(v) > MAX_LIST_IN_CELL:
            s = f"[{len(v)} 个值]"
        else:
            s = "[" + ", ".join(fmt(x) for x in v) + "]"
    elif isinstance(v, dict):
        s = json.dumps(v, ensure_ascii=False, sort_keys=True)
    else:
        s = " ".join(str(v).split())
        if len(s) > MAX_TEXT_IN_CELL or "@" in s:  # captured source code: cut, and a code span so
            cut = s[:MAX_TEXT_IN_CELL].replace("`", "'").replace("|", "\\|")  # "@triton.jit" is no citation
            return f"`{cut}`" + (f"… ({len(s)} 字符，见 JSON)" if len(s) > MAX_TEXT_IN_CELL else "")
    return s.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def is_scalar(v) -> bool:
    return v is None or isinstance(v, (str, int, float, bool))


def flatten(d: dict, prefix: str = "") -> dict:
    """{"ours": {"median_ms": 1}} -> {"ours.median_ms": 1}; lists stay as values."""
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def columns_of(rows: list[dict]) -> list[str]:
    cols: list[str] = []
    for r in rows:
        for k in r:
            if k not in cols:
                cols.append(k)
    return cols


def as_rows(data):
    """A list of flat dicts when ``data`` has a natural table shape, else None."""
    if isinstance(data, list) and data and all(isinstance(r, dict) for r in data):
        return [flatten(r) for r in data]
    if isinstance(data, list) and data and all(is_scalar(x) for x in data):
        return [{"value": x} for x in data]
    if isinstance(data, dict) and data:
        vals = list(data.values())
        if all(isinstance(v, dict) for v in vals):                       # {"256": {...}, "512": {...}}
            return [{"key": k, **flatten(v)} for k, v in data.items()]
        if all(isinstance(v, list) for v in vals) and all(is_scalar(x) for v in vals for x in v):
            lengths = {len(v) for v in vals}
            if len(lengths) == 1 and lengths != {0}:                      # columns: {"N": [...], "gbps": [...]}
                n = lengths.pop()
                return [{k: data[k][i] for k in data} for i in range(n)]
        if all(is_simple(v) for v in data.values()):                        # a record: key/value rows
            return [{"key": k, "value": v} for k, v in flatten(data).items()]
    return None


def is_simple(v) -> bool:
    """Fits in one table cell, or flattens into key/value cells (no list of records inside)."""
    if is_scalar(v):
        return True
    if isinstance(v, list):
        return all(is_scalar(x) for x in v)
    if isinstance(v, dict):
        return all(is_simple(x) for x in v.values())
    return False


def table(rows: list[dict], source: str, max_rows: int = MAX_ROWS) -> list[str]:
    all_cols = columns_of(rows)
    scalar = [c for c in all_cols if all(is_scalar(r.get(c)) for r in rows)]
    cols = (scalar + [c for c in all_cols if c not in scalar])[:MAX_COLS]
    lines = ["| " + " | ".join(fmt(c) for c in cols) + " |", "|" + "---|" * len(cols)]
    for r in rows[:max_rows]:
        lines.append("| " + " | ".join(fmt(r.get(c)) for c in cols) + " |")
    cut = [f"{len(rows)} 行中的前 {max_rows} 行"] if len(rows) > max_rows else []
    cut += [f"{len(all_cols)} 列中的 {len(cols)} 列"] if len(all_cols) > len(cols) else []
    if cut:
        lines += ["", f"（只显示{'、'.join(cut)}：完整数据见 [{source}]({source})。）"]
    return lines


def render_data(data, source: str, depth: int = 0) -> list[str]:
    if isinstance(data, dict) and isinstance(data.get("summary"), list) and all(isinstance(r, dict) for r in data["summary"]):
        rows = [{c: r.get(c) for c in SUMMARY_COLS if c in r} for r in data["summary"]]
        rest = [k for k in data if k != "summary" and not is_scalar(data[k])]
        return (table(rows, source, max_rows=len(rows))
                + (["", "其余字段（" + "、".join(f"`{fmt(k)}`" for k in rest) + f"）见 [{source}]({source})。"] if rest else []))
    rows = as_rows(data)
    if rows is not None:
        return table(rows, source)
    if isinstance(data, dict) and data and depth < 1:   # mixed record: simple fields first, then one table per key
        simple = {k: v for k, v in data.items() if is_simple(v)}
        out: list[str] = table(as_rows(simple), source) if simple else []
        for k, v in data.items():
            if k not in simple:
                out += ["", f"**{fmt(k)}**", ""] + render_data(v, source, depth + 1)
        return out
    size = len(data) if isinstance(data, (list, dict)) else 1
    return [f"（嵌套数据，{size} 项：见 [{source}]({source})。）"]


def split_doc(doc) -> tuple[str | None, dict, object]:
    """(name, meta, data) for a tcourse recording or any other JSON document."""
    if isinstance(doc, dict) and "data" in doc and isinstance(doc.get("meta"), dict):
        return doc.get("name"), doc["meta"], doc["data"]
    if isinstance(doc, dict):
        meta = dict(doc["meta"]) if isinstance(doc.get("meta"), dict) else {}
        meta.update({k: doc[k] for k in ENV_KEYS if k in doc and is_scalar(doc[k])})
        versions = doc.get("versions") if isinstance(doc.get("versions"), dict) else {}  # bench suite, grader results
        meta.update({k: v for k, v in versions.items() if k in ENV_KEYS and is_scalar(v)})
        if isinstance(doc.get("capability"), list):  # [9, 0] as recordings write it: "9.0"
            meta["capability"] = ".".join(str(x) for x in doc["capability"])
        rest = {k: v for k, v in doc.items() if k not in ENV_KEYS and k not in ("name", "meta")}
        return doc.get("name"), meta, rest
    return None, {}, doc


def env_row(meta: dict) -> tuple:
    return tuple(fmt(meta.get(k)) for k in ENV_KEYS)


def render(results_dir: Path = RESULTS_DIR, root: Path = ROOT) -> str:
    files = sorted(results_dir.glob("*.json"))
    plots = sorted(p for p in results_dir.glob("*") if p.suffix in (".png", ".svg"))
    rel = lambda p: p.relative_to(root).as_posix()  # noqa: E731  (paths as seen from the repo root)
    out = ["<!-- 由 scripts/build_appendix.py 生成，不要手工编辑：录制新结果后重新运行它。 -->", ""]
    if not files:
        out += ["::: {.callout-note}", "## 还没有录制的结果", "",
                f"`{rel(results_dir)}/` 里还没有 JSON 文件。在有 GPU 的机器上运行"
                " `python scripts/record_gpu.py`（以及基准测试套件），"
                "然后运行 `python scripts/build_appendix.py` 再 `quarto render`。", ":::", ""]
        return "\n".join(out)

    docs = []
    for p in files:
        name, meta, data = split_doc(json.loads(p.read_text(encoding="utf-8")))
        docs.append((p, name or p.stem, meta, data))

    envs: dict[tuple, list[str]] = {}
    for p, name, meta, _ in docs:
        envs.setdefault(env_row(meta), []).append(p.name)
    out += ["### 录制环境", "", f"下面的 {len(docs)} 个结果文件来自这些环境（同一环境的文件合并为一行）：", "",
            "| 环境 | " + " | ".join(ENV_HEADERS) + " | 文件数 |", "|" + "---|" * (len(ENV_HEADERS) + 2)]
    for i, (row, names) in enumerate(sorted(envs.items()), 1):
        out.append(f"| {i} | " + " | ".join(row) + f" | {len(names)} |")
    out.append("")
    for i, (row, names) in enumerate(sorted(envs.items()), 1):
        out.append(f"- 环境 {i}：" + "、".join(f"`{n}`" for n in names))
    out.append("")

    out += ["### 结果", ""]
    for p, name, meta, data in docs:
        label = " · ".join(f"{k} {fmt(meta[k])}" for k in ENV_KEYS if meta.get(k) is not None)
        out += [f"#### {fmt(name)}", "", f"来源：[{rel(p)}]({rel(p)})" + (f"；{label}" if label else ""), ""]
        out += render_data(data, rel(p)) + [""]

    if plots:
        out += ["### 图", ""]
        for p in plots:
            out += [f"![{p.stem}]({rel(p)})", ""]
    return "\n".join(out)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="exit 1 if the include file is out of date")
    args = ap.parse_args(argv)
    text = render()
    current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else None
    if args.check:
        if current != text:
            print(f"{OUTPUT.relative_to(ROOT)} is out of date: run python scripts/build_appendix.py")
            return 1
        return 0
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT.relative_to(ROOT)} from {len(sorted(RESULTS_DIR.glob('*.json')))} result files")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
