"""Recorded GPU results: JSON files under results/<device>/, written by scripts/record_gpu.py.

A recording carries its own label (device, date, versions) so a CPU reader always knows
what machine a number came from.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
from dataclasses import dataclass
from pathlib import Path

RESULTS = Path(__file__).resolve().parent.parent / "results"
DEFAULT_DEVICE_DIR = "h200"


class NoRecording(LookupError):
    pass


@dataclass
class Recording:
    name: str
    meta: dict
    data: object

    def label(self) -> str:
        m = self.meta
        return (f"{m.get('device', '?')} · {m.get('date', '?')} · torch {m.get('torch', '?')} · "
                f"triton {m.get('triton', '?')} · driver {m.get('driver', '?')}")


def _path(name: str, device_dir: str) -> Path:
    return RESULTS / device_dir / f"{name}.json"


def load(name: str, device_dir: str = DEFAULT_DEVICE_DIR) -> Recording:
    p = _path(name, device_dir)
    if not p.exists():
        raise NoRecording(f"还没有 {name} 的 GPU 记录（{p.relative_to(RESULTS.parent)}）：在 GPU 上运行 scripts/record_gpu.py 生成。")
    doc = json.loads(p.read_text(encoding="utf-8"))
    return Recording(doc["name"], doc["meta"], doc["data"])


def meta_for(rt) -> dict:
    g = rt.gpu_info
    return {
        "device": g.name if g else "CPU",
        "capability": f"{g.capability[0]}.{g.capability[1]}" if g else None,
        "sm_count": g.sm_count if g else None,
        "driver": g.driver if g else None,
        "date": _dt.date.today().isoformat(),
        "python": rt.versions.get("python"),
        "torch": rt.versions.get("torch"),
        "triton": rt.versions.get("triton"),
        "numpy": rt.versions.get("numpy"),
    }


def save(name: str, data, rt, device_dir: str = DEFAULT_DEVICE_DIR) -> Path:
    if not rt.gpu:
        raise ValueError("only GPU runs are recorded: interpreter timings mean nothing")
    p = _path(name, device_dir)
    p.parent.mkdir(parents=True, exist_ok=True)
    doc = {"name": name, "meta": meta_for(rt), "data": data}
    p.write_text(json.dumps(doc, indent=1, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
    return p


def save_if_recording(name: str, data, rt) -> Path | None:
    """Notebook cells call this on every GPU run; it writes only under TCOURSE_RECORD=1."""
    if os.environ.get("TCOURSE_RECORD") == "1":
        return save(name, data, rt)
    return None
