"""Bar charts of the suite's speedups (torch time / ours) with the targets drawn in."""
from __future__ import annotations

from pathlib import Path

GROUPS = {"axpy": ("axpy",), "softmax": ("softmax", "softmax_online"), "matmul": ("matmul",),
          "attention": ("attention",)}


def write_plots(result: dict, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    label = f"{result['device']} · torch {result['versions'].get('torch')} · triton {result['versions'].get('triton')}" \
            f" · {result['date'][:10]}"
    for stem, fams in GROUPS.items():
        rows = [r for r in result["summary"] if r.get("family") in fams and "error" not in r]
        if not rows:
            continue
        baselines = list(dict.fromkeys(r["baseline"] for r in rows))
        cases = list(dict.fromkeys(r["case"] for r in rows))
        fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(cases) + 2), 4.2))
        width = 0.8 / len(baselines)
        for i, b in enumerate(baselines):
            xs, ys, tg = [], [], []
            for j, c in enumerate(cases):
                r = next((r for r in rows if r["case"] == c and r["baseline"] == b), None)
                if r:
                    xs.append(j + (i - (len(baselines) - 1) / 2) * width)
                    ys.append(r["speedup"])
                    tg.append(r["target"])
            ax.bar(xs, ys, width, label=f"vs {b}")
            for x, y in zip(xs, ys):
                ax.text(x, y, f"{y:.2f}", ha="center", va="bottom", fontsize=7)
            for x, t in zip(xs, tg):
                if t is not None:
                    ax.hlines(t, x - width / 2, x + width / 2, colors="k", linestyles="--", linewidth=1)
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set_xticks(range(len(cases)))
        ax.set_xticklabels(cases, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("speedup = torch time / ours (dashed: target)")
        ax.set_title(f"{stem}: {label}", fontsize=9)
        ax.legend(fontsize=8)
        fig.tight_layout()
        p = out / f"bench_{stem}.png"
        fig.savefig(p, dpi=120)
        plt.close(fig)
        written.append(p)
    return written
