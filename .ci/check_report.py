#!/usr/bin/env python3
"""Shows a `verbena plot` report page in headless Chromium and checks it.

The one place verbena's figures meet a browser: `verbena plot` writes
PNGs itself (resvg), so this checks what only a browser can — that
report.html renders with its SVG figures — and that a faceted figure has a
panel per value of its facet knob.

For DIR (a directory `verbena plot` wrote into), it
- counts the `<g class="panel">` of DIR/FIGURE.svg and compares them with
  the distinct values of the facet knob in RESULTS/results.json, and checks
  report.html shows that figure;
- screenshots DIR/report.html at 1200 px wide (the height verbena estimated
  in `<meta name="verbena-page-height">`) into DIR/report.png with headless
  Chromium, and checks the screenshot is a real page with check_png.py.

usage: check_report.py DIR --facet KNOB [--figure NAME] [--results DIR]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_png  # noqa: E402


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def screenshot(chromium, page, png, height):
    profile = tempfile.mkdtemp(prefix="verbena-chromium-")
    try:
        # The background-networking flags keep Chromium from reaching for
        # hosts a closed network refuses.
        subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--no-first-run", "--disable-dev-shm-usage", "--disable-quic",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--force-device-scale-factor=1", f"--user-data-dir={profile}",
             f"--screenshot={png}", f"--window-size=1200,{height}", f"file://{page}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120, check=False)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    return os.path.exists(png)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir")
    parser.add_argument("--facet", required=True, help="the knob the figure is faceted by")
    parser.add_argument("--figure", default="throughput", help="the faceted figure [throughput]")
    parser.add_argument("--results", help="where results.json is [DIR]")
    args = parser.parse_args()
    out = os.path.abspath(args.dir)
    problems = []

    rows = json.load(open(os.path.join(args.results or out, "results.json")))
    expected = sorted({row["knobs"][args.facet] for row in rows if args.facet in row["knobs"]})
    svg = open(os.path.join(out, f"{args.figure}.svg")).read()
    panels = re.findall(r'<g class="panel" data-name="([^"]*)"', svg)
    print(f"{args.figure}.svg: {len(panels)} panels {panels}; {args.facet} has {len(expected)} values")
    if len(panels) != len(expected) or len(expected) < 2:
        problems.append(f"{len(panels)} panels, expected one per {args.facet} ({len(expected)})")
    short = args.facet.rsplit(".", 1)[-1]
    missing = [v for v in expected if f"{short}={v}" not in panels]
    if missing:
        problems.append(f"no panel for {args.facet} = {', '.join(missing)}")
    html = open(os.path.join(out, "report.html")).read()
    if f'src="{args.figure}.svg"' not in html:
        problems.append(f"report.html does not show {args.figure}.svg")

    chromium = find_chromium()
    if chromium is None:
        problems.append("no Chromium on PATH (install the chromium package)")
    else:
        match = re.search(r'<meta name="verbena-page-height" content="(\d+)">', html)
        height = int(match.group(1)) if match else 4000
        png = os.path.join(out, "report.png")
        if os.path.exists(png):
            os.remove(png)
        if not screenshot(chromium, os.path.join(out, "report.html"), png, height):
            problems.append(f"{chromium} wrote no screenshot of report.html")
        else:
            png_problems, summary = check_png.check(png, 1000, 1500)
            print(summary)
            problems.extend(png_problems)

    for problem in problems:
        print(f"FAIL {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
