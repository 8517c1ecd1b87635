#!/usr/bin/env python3
"""hcomm_perf --json logs as one table and one plot.

    perf/perf_table.py TABLE.md [PLOT.png] LOG.json...

Each log holds one run's rows (hcomm_perf --json: one JSON object a size).
The table gives, per collective, type, rank count and size, each side's
time and busbw and the ratio (baseline time / HCOMM time: > 1, HCOMM
faster), then each run's median ratio. The plot (matplotlib) draws busbw
against size, a panel per collective, a line per side and type. The
baseline is whichever side the run had: NCCL (--nccl) or MPI.
"""
import json
import statistics
import sys


def load(paths):
    runs = {}
    for path in paths:
        with open(path) as f:
            for line in f:
                if not line.startswith("{"):
                    continue  # a warning or mpirun's own line
                row = json.loads(line)
                base = "nccl" if "nccl" in row else "mpi"
                key = (row["collective"], row["type"], row["nranks"], base)
                runs.setdefault(key, []).append(row)
    return runs


def size_label(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return "%d %s" % (n >> shift, unit)
    return "%d B" % n


def cell(side, field):
    value = side.get(field)
    return "n/a" if value is None else "%.4g" % value


def table(runs):
    out = []
    for (coll, dtype, nranks, base), rows in sorted(runs.items()):
        name = base.upper() if base == "nccl" else "MPI"
        out.append("### %s, %s, %d ranks: HCOMM against %s\n" %
                   (coll, dtype, nranks, name))
        out.append("| size | HCOMM us | HCOMM busbw GB/s | %s us | "
                   "%s busbw GB/s | ratio | wrong (HCOMM, %s) |" % (name, name, name))
        out.append("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        ratios = []
        for r in rows:
            ratio = r.get("ratio")
            if ratio is not None:
                ratios.append(ratio)
            out.append("| %s | %s | %s | %s | %s | %s | %s, %s |" %
                       (size_label(r["size"]), cell(r["hcomm"], "time_us"),
                        cell(r["hcomm"], "busbw"), cell(r[base], "time_us"),
                        cell(r[base], "busbw"),
                        "n/a" if ratio is None else "%.2f" % ratio,
                        cell(r["hcomm"], "wrong"), cell(r[base], "wrong")))
        if ratios:
            out.append("\nMedian ratio: %.2f\n" % statistics.median(ratios))
        else:
            out.append("\nMedian ratio: n/a\n")
    return "\n".join(out) + "\n"


def plot(runs, path):
    import matplotlib
    matplotlib.use("Agg")  # no display on the GPU machine
    import matplotlib.pyplot as plt

    colls = sorted({k[0] for k in runs})
    # a colour a type and rank count, both sides in it: HCOMM solid, the
    # baseline dashed
    colour = {}
    for key in sorted(runs):
        colour.setdefault(key[1:3], "C%d" % len(colour))
    fig, axes = plt.subplots(1, len(colls), figsize=(5 * len(colls), 4),
                             squeeze=False)
    for ax, coll in zip(axes[0], colls):
        for (c, dtype, nranks, base), rows in sorted(runs.items()):
            if c != coll:
                continue
            for side, style in (("hcomm", "-"), (base, "--")):
                points = [(r["size"], r[side]["busbw"]) for r in rows
                          if r[side].get("busbw") is not None]
                if points:
                    xs, ys = zip(*points)
                    label = "%s %s, %d ranks" % (
                        "HCOMM" if side == "hcomm" else base.upper(), dtype,
                        nranks)
                    ax.plot(xs, ys, style, marker=".", label=label,
                            color=colour[(dtype, nranks)])
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")  # 8 B to 8 GiB spans six decades of busbw
        ax.set_xlabel("size (bytes)")
        ax.set_ylabel("busbw (GB/s)")
        ax.set_title(coll)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv):
    if len(argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    table_path, rest = argv[1], argv[2:]
    plot_path = rest.pop(0) if rest[0].endswith(".png") else None
    runs = load(rest)
    if not runs:
        sys.stderr.write("perf_table.py: no hcomm_perf --json rows in %s\n" %
                         " ".join(rest))
        return 1
    with open(table_path, "w") as f:
        f.write(table(runs))
    if plot_path:
        try:
            plot(runs, plot_path)
        except ImportError:
            sys.stderr.write("perf_table.py: no matplotlib: no plot\n")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
