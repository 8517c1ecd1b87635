#!/usr/bin/env python3
"""Summarises lib_ab.sh's runs: per collective, rank count, type and size,
each library's median HCOMM time (us) with the range of its runs and its
time over the first library's, then MPI's median over every run.

    lib_ab.py RUNS.jsonl NAME...   (the libraries in the order to show)
"""
import json
import statistics
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: lib_ab.py RUNS.jsonl NAME...")
    names = sys.argv[2:]
    cells = {}
    with open(sys.argv[1]) as f:
        for line in f:
            row = json.loads(line)
            key = (row["collective"], row["nranks"], row["type"], row["size"])
            cell = cells.setdefault(key, {"MPI": []})
            cell.setdefault(row["lib"], []).append(row["hcomm"]["time_us"])
            cell["MPI"].append(row["mpi"]["time_us"])
    if not cells:
        sys.exit("lib_ab.py: no rows in %s" % sys.argv[1])
    print("# median HCOMM time, us [fastest-slowest run] (time over %s's); "
          "MPI: median of all runs" % names[0])
    for key in sorted(cells):
        cell = cells[key]
        first = cell.get(names[0])
        base = statistics.median(first) if first else None
        parts = []
        for name in names:
            times = cell.get(name)
            if not times:
                parts.append("%s -" % name)
                continue
            med = statistics.median(times)
            ratio = " (%.2f)" % (med / base) if base else ""
            parts.append("%s %.3f [%.3f-%.3f]%s" %
                         (name, med, min(times), max(times), ratio))
        parts.append("MPI %.3f" % statistics.median(cell["MPI"]))
        print("%-15s %3d %-8s %10d  %s" % (key + ("  ".join(parts),)))


if __name__ == "__main__":
    main()
