#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""callgrind_perop.py SHORT.out LONG.out OPS [ROWS]: where one operation's
user-space instructions go, from two callgrind runs of the same server over
SHORT and LONG operations (bench-pathlen.sh with BREAKDOWN=ROWS). Each
function's count in the long run minus the short one, divided by OPS (the
difference in operations), so that start-up and shut-down cancel out; the
ROWS largest by self cost (the function's own instructions: they add up to
the total), then the same summed per source file - the layers. callgrind's
inclusive costs are not shown: a fiber switch makes a function that
suspends look as if it ran what other fibers ran meanwhile."""
import re
import subprocess
import sys

LINE = re.compile(r'^\s*([\d,]+)\s+\([^)]*\)\s+(\S.*?)(?:\s+\[.*\])?$')


def costs(path, inclusive, by_file=False):
    out = subprocess.run(['callgrind_annotate', '--inclusive=' + ('yes' if inclusive else 'no'),
                          '--threshold=100', '--auto=no', path], capture_output=True, text=True,
                         check=True).stdout
    table = {}
    for line in out.splitlines():
        m = LINE.match(line)
        if m and ':' in m.group(2) and 'PROGRAM TOTALS' not in line:
            where, name = m.group(2).split(':', 1)
            key = (where.split('/')[-1] if by_file else name.split("'")[0])
            table[key] = table.get(key, 0) + int(m.group(1).replace(',', ''))
    return table


def per_op(short, long_, ops, by_file=False):
    a, b = costs(short, False, by_file), costs(long_, False, by_file)
    return {k: (b.get(k, 0) - a.get(k, 0)) / ops for k in set(a) | set(b)}


def show(table, rows, what):
    total = sum(table.values())
    print('%8s  %s (instructions per operation; all: %.0f)' % ('self', what, total))
    for name in sorted(table, key=table.get, reverse=True)[:rows]:
        if table[name] >= 0.5:
            print('%8.0f  %s' % (table[name], name))


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    short, long_, ops = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rows = int(sys.argv[4]) if len(sys.argv) > 4 else 30
    show(per_op(short, long_, ops), rows, 'function')
    print()
    show(per_op(short, long_, ops, by_file=True), rows, 'source file')


if __name__ == '__main__':
    main()
