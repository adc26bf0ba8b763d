#!/usr/bin/env bash
# Renders an ember HTML report (ember compare/bench --report) in headless Chromium, Debian's
# chromium package, and saves a PNG of the whole page, to look at what a reader sees.
# Usage: scripts/report_screenshot.sh REPORT.html OUT.png [WIDTHxHEIGHT, default 900x2400]
set -euo pipefail
if [ $# -lt 2 ]; then
    echo "usage: $0 REPORT.html OUT.png [WIDTHxHEIGHT]" >&2
    exit 2
fi
report=$(realpath "$1")
out=$(realpath -m "$2")
size=${3:-900x2400}
if ! command -v chromium >/dev/null; then
    echo "report_screenshot: chromium is not installed (apt-get install chromium)" >&2
    exit 1
fi
rm -f "$out"
# root needs --no-sandbox; --disable-gpu and no network: the page must draw from itself alone
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --disable-extensions \
         --window-size="${size/x/,}" --screenshot="$out" "file://$report" >/dev/null 2>&1
if [ ! -s "$out" ]; then
    echo "report_screenshot: chromium wrote no screenshot of $report" >&2
    exit 1
fi
echo "$out"
