#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""plot_stable.py - the README's plot of the stable figures: one bar per
figure, the runtime's value over its peer's from the same run, on a log
scale around 1.0 (left of the line: the runtime needs less). No plotting
package needed: the SVG is written by hand.

    bench/plot_stable.py doc/perf/stable.txt doc/perf/stable.svg

The input has one figure per line, tab-separated: label, the runtime's
value, the peer's name, the peer's value (lines starting with '#' are
comments; the first comment line is the plot's title).
"""
import math
import sys

WIDTH, ROW, LEFT, RIGHT, TOP = 820, 26, 330, 130, 44
LOW, HIGH = 0.005, 10.0  # the axis: ratios outside are clipped


def read(path):
    title, rows = "", []
    for line in open(path, encoding="utf-8"):
        line = line.rstrip("\n")
        if line.startswith("#"):
            title = title or line.lstrip("# ")
            continue
        if line.strip():
            label, ours, peer, theirs = line.split("\t")
            rows.append((label, float(ours), peer, float(theirs)))
    return title, rows


def x_of(ratio):
    span = WIDTH - LEFT - RIGHT
    r = min(max(ratio, LOW), HIGH)
    return LEFT + span * (math.log10(r) - math.log10(LOW)) / (math.log10(HIGH) - math.log10(LOW))


def esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def axis(height):
    out = []
    for tick in (0.01, 0.1, 0.5, 1.0, 2.0, 5.0):
        x = x_of(tick)
        weight = 'stroke="#333" stroke-width="1.5"' if tick == 1.0 else 'stroke="#ccc"'
        out.append(f'<line x1="{x:.1f}" y1="{TOP - 6}" x2="{x:.1f}" y2="{height - 24}" {weight}/>')
        out.append(f'<text x="{x:.1f}" y="{height - 8}" text-anchor="middle">{tick:g}x</text>')
    return out


def bar(i, row):
    label, ours, peer, theirs = row
    ratio = ours / theirs
    y = TOP + i * ROW
    x0, x1 = sorted((x_of(1.0), x_of(ratio)))
    colour = "#3a7d44" if ratio <= 1.0 else "#b5473a"
    return [
        f'<text x="{LEFT - 8}" y="{y + 15}" text-anchor="end">{esc(label)}</text>',
        f'<rect x="{x0:.1f}" y="{y + 3}" width="{max(x1 - x0, 1):.1f}" height="{ROW - 8}" fill="{colour}"/>',
        f'<text x="{WIDTH - RIGHT + 8}" y="{y + 15}">{ratio:.2f}x {esc(peer)}</text>',
    ]


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot_stable.py STABLE.txt OUT.svg")
    title, rows = read(sys.argv[1])
    height = TOP + ROW * len(rows) + 30
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           'font-family="sans-serif" font-size="12">',
           f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
           f'<text x="{WIDTH / 2}" y="20" text-anchor="middle" font-size="14">{esc(title)}</text>']
    svg += axis(height)
    for i, row in enumerate(rows):
        svg += bar(i, row)
    svg.append("</svg>")
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        f.write("\n".join(svg) + "\n")


if __name__ == "__main__":
    main()
