#!/usr/bin/env bash
# 用真实 Excalidraw（excalidraw-check 工具）打开每个 .excalidraw，检查并导出 SVG 到 diagrams/。
# usage: diagrams/export_svg.sh            (needs node + chromium; the tool installs itself on first use)
#        EXCALIDRAW_CHECK=/path/to/check.sh diagrams/export_svg.sh
# Fails (and copies nothing) if Excalidraw reports any problem or warning (--strict).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CHECK="${EXCALIDRAW_CHECK:-/work/shared/tools/excalidraw-check/check.sh}"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
python3 "$HERE/generate_diagrams.py" --check
"$CHECK" "$HERE" --out "$OUT" --strict
for f in "$HERE"/*.excalidraw; do
  stem="$(basename "$f" .excalidraw)"
  cp "$OUT/$stem.svg" "$HERE/$stem.svg"
  echo "exported $HERE/$stem.svg ($(wc -c < "$HERE/$stem.svg") bytes)"
done
