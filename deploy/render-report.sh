#!/usr/bin/env bash
# Renders a platter HTML report (platter report … --format html) to a PNG with headless
# Chromium (Debian's `chromium` package), e.g. to check a report in CI or attach it to a
# ticket. The page needs no network: charts are inline SVG.
# Usage: deploy/render-report.sh REPORT.html OUT.png [WIDTHxHEIGHT]
set -euo pipefail
html=$(realpath "$1")
png=$(realpath -m "$2")
size=${3:-1280x2400}
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
[ -n "$browser" ] || { echo "no chromium found: apt install chromium" >&2; exit 2; }
# --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
  --window-size="${size/x/,}" --screenshot="$png" "file://$html" 2>/dev/null
[ -s "$png" ] || { echo "chromium wrote no screenshot" >&2; exit 1; }
echo "$png"
