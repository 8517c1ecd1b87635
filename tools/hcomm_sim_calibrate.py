#!/usr/bin/env python3
"""Calibrates hcomm_sim on this machine and checks it against hcomm_perf.

Run from a build directory, as root (for the network namespaces):
    python3 ../tools/hcomm_sim_calibrate.py [--quick] [--no-netns |
        --fake-hosts] [--copy-bytes N]
        [--measure-only [--passes P] | --replay hcomm_sim_measured.json]

1. Figures: the CPU's reduce and copy bandwidth (hcomm_sim --measure-cpu);
   each link level's latency and bandwidth fitted so that the simulator
   reproduces hcomm_perf's 2-rank recursive-doubling allreduce, 16 calls
   back to back as hcomm_perf times them (8 to 512 B: latency, or over TCP
   each side's CPU a message; 2, 4 and 16 MiB: bandwidth; 256 KiB, whose
   buffers fit in a core's L2: the cache's speedup, which the fit's
   rendezvous see reading the sender's unchanged input, and its copies
   between the fit's pair (cache_ranks 2)); the protocols' figures as
   protocol() says which protocols HCOMM's sends take: by default (HCOMM's
   own rendezvous threshold) both CPUs copy a message up to 65535 B at the
   CPU's copy rate, one past a fragment (8248 B) after a fixed start fitted
   from 16 and 32 KiB, and larger ones go by rendezvous; under UCX's own
   threshold (UCX_RNDV_THRESH=auto, and records taken before HCOMM set it)
   the copies end at 5028 B, and the rendezvous cost is fitted from 16 and
   32 KiB. --copy-bytes N: copies up to N instead (0: the model without
   copies, as hcomm_sim_here.json and hcomm_sim_netns.json were fitted: an
   eager bandwidth from 4 KiB, a rendezvous cost from 32 KiB). Between two
   processes of this host (UCX shared memory), and between two
   network-namespace hosts (UCX over TCP on a veth bridge, as
   test/multinode/netns.sh makes them; there UCX_TLS=tcp,self, so ranks of
   one namespace host talk TCP over loopback, which is fitted too).
   --fake-hosts: no namespaces; the hosts are groups of this host's ranks
   (HCOMM_OVERRIDE_TOPO), all of them talking UCX over TCP on loopback
   (UCX_TLS=tcp,self) as between namespace hosts, each rank on a core of
   its own: where namespaces cannot be made, or the cores are too few to
   run 5 ranks without sharing them.
2. Writes the figures to tools/hcomm_sim_here.json (one host) and
   tools/hcomm_sim_netns.json (namespace hosts; hcomm_sim_fakehosts.json
   with --fake-hosts).
3. Compares predictions with hcomm_perf (median trial of the slowest rank,
   fastest of HCOMM_CALIB_REPS runs, 5 by default)
   for 2 to 8 ranks on this host (a core each, bound, where it has the
   cores; else unbound and oversubscribed, as past 2 on a 2-core one)
   and for 2 hosts x 2 and 3 hosts of 2, 2, 1 ranks, each algorithm forced
   with HCOMM_ALGO, and prints the table (markdown) with the ratio.
With --measure-only it runs only the measurements (step 3's too) and
keeps them in hcomm_sim_measured.json (in $OUT when set); --replay FILE
then does steps 1-3 from them without running hcomm_perf, on any machine,
writing the figures into $OUT or the current directory. --passes P runs
the whole measurement P times, each shape once a pass, and keeps each
size's fastest (as HCOMM_CALIB_REPS does for runs back to back): a slow
spell of the machine then costs one pass, not every run of one shape.
The record keeps each pass's figures too ("passes of" each key), which
show how far the machine repeats itself.
--shm: the node's shared-memory algorithms instead, which selection takes
on one node (hcomm_sim_shm.c): AllReduce as selection takes it, one-shot
at every size and never one-shot (two-shot, then direct reads), and
Broadcast, at 2, 4, 8 and 16 ranks a core each, 8 B to 16 MiB; the
segment's figures fitted (main_shm says from which runs) into
hcomm_sim_shm.json, and every rank count compared.
Only the standard library; every number comes from the programs it runs.
"""
import atexit
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.getcwd()
SIM = os.path.join(BUILD, "tools", "hcomm_sim")
PERF = os.path.join(BUILD, "perf", "hcomm_perf")
AGENT = os.path.join(HERE, "..", "test", "multinode", "netns_agent.sh")
QUICK = "--quick" in sys.argv
FAKE_HOSTS = "--fake-hosts" in sys.argv
NETNS = "--no-netns" not in sys.argv and not FAKE_HOSTS
REPS = int(os.environ.get("HCOMM_CALIB_REPS", "1" if QUICK else "5"))
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
           OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", HCOMM_TIMEOUT="120")
TAG = "hs%d" % (os.getpid() % 10000)
NET = "10.214.%d" % (os.getpid() % 250)
HOSTS = [TAG + "n0", TAG + "n1", TAG + "n2"]


ARGS = sys.argv[1:]
MEASURE_ONLY = "--measure-only" in ARGS
REPLAY = ARGS[ARGS.index("--replay") + 1] if "--replay" in ARGS else None
# The largest message UCX moves by copies on both sides (copy_bytes) and
# the largest in one eager fragment (eager_bytes); larger ones go by
# rendezvous. --copy-bytes N sets the first (0: the model without copies).
COPY_BYTES = (int(ARGS[ARGS.index("--copy-bytes") + 1])
              if "--copy-bytes" in ARGS else None)
# Where the fitted figures go: tools/, as this machine's, unless they come
# from another machine's record (then the current directory).
OUTDIR = os.environ.get("OUT", os.getcwd() if REPLAY else HERE)
RECORD = os.path.join(OUTDIR, "hcomm_sim_measured.json")
# Calls the simulator runs back to back, as hcomm_perf's trials do: a
# broadcast's root then runs ahead of its receivers, as it does there.
CALLS = 16
PASSES = int(ARGS[ARGS.index("--passes") + 1]) if "--passes" in ARGS else 1
# --shm: the shared-memory algorithms that selection takes on one node
# instead of the plans (one-shot, two-shot, direct reads; main_shm).
SHM = "--shm" in ARGS
MEASURED = {}
FRESH = set()  # keys measured in this pass
if REPLAY:
    with open(REPLAY) as f:
        MEASURED = json.load(f)


def recorded(key, measure):
    """What this machine measures under key, kept in RECORD as it comes,
    or read back from an earlier run's record with --replay: the measuring
    (--measure-only) can then run on a machine whose time is dear, and the
    fitting and comparing, which only run the simulator, elsewhere."""
    if REPLAY or key in FRESH or (key in MEASURED and
                                  not key.startswith("perf ")):
        return MEASURED[key]  # measured once a pass, also when asked twice
    got = measure()
    if key.startswith("perf ") and PASSES > 1:  # each pass's, as it came
        MEASURED.setdefault("passes of " + key, []).append(got)
    if key in MEASURED:  # an earlier pass's: each size's fastest
        got = {z: min(t, MEASURED[key].get(z, t)) for z, t in got.items()}
    MEASURED[key] = got
    FRESH.add(key)
    with open(RECORD, "w") as f:
        json.dump(MEASURED, f, indent=1)
        f.write("\n")
    return MEASURED[key]


def rndv_thresh():
    """Which rendezvous threshold HCOMM's sends take here, as hcomm_info
    says: "hcomm" (HCOMM's own), the user's UCX_RNDV_THRESH, or "auto"
    (UCX's own: UCX before 1.17)."""
    if "UCX_RNDV_THRESH" in os.environ:
        return os.environ["UCX_RNDV_THRESH"]
    info = sh(os.path.join(BUILD, "tools", "hcomm_info"), check=False).stdout
    return "hcomm" if "rendezvous threshold intra:" in info else "auto"


def protocol():
    """UCX's protocols for HCOMM's sends inside the node, as UCX_PROTO_INFO
    showed them on the 16-core GPU host (UCX 1.22): with HCOMM's own
    rendezvous threshold (ucx_tp.c, intra 64 KiB) eager short to 92 B,
    eager copies in one fragment to 8248 B and in several to 65535 B, then
    a rendezvous that reads the peer's memory (CMA); with UCX's own
    ("auto", as a user's UCX_RNDV_THRESH=auto, and every record taken
    before HCOMM set it) eager copies to 5028 B, then that rendezvous."""
    thresh = recorded("rndv_thresh", rndv_thresh) \
        if not REPLAY or "rndv_thresh" in MEASURED else "auto"
    if COPY_BYTES is not None:
        return min(COPY_BYTES or 5028, 8248), COPY_BYTES
    if thresh == "hcomm":
        return 8248, 65535
    if thresh == "auto":
        return 5028, 5028
    sys.exit("UCX_RNDV_THRESH=%s: give the model's --copy-bytes" % thresh)


# Over TCP (namespace or fake hosts, UCX counting them one node) the
# largest message UCX sends as one, zero-copy from the sender's buffer
# and copied out by the receiver: UCX_PROTO_INFO on the GPU host (UCX
# 1.22, HCOMM's threshold; README, "Simulator"). Past it the copies go in
# fragments.
TCP_ZCOPY_BYTES = 16483


def sh(*cmd, check=True, env=None):
    return subprocess.run(cmd, check=check, capture_output=True, text=True,
                          env=dict(os.environ, **env) if env else None)


def perf(ranks, coll, algo, lo, hi, factor, hosts=None, reps=None):
    """hcomm_perf's time (us) per size: its median trial, the fastest of
    reps runs. The simulator models a machine of its own; here other
    sessions' builds and tests share the two cores, and a run either
    misses them or loses whole scheduler quanta (bimodal: the median of
    runs lands on either mode)."""
    # the namespaces' names change from run to run; their shape does not
    where = (hosts.replace(TAG, "fake" if FAKE_HOSTS else "ns")
             if hosts else "one host")
    key = "perf %d %s %s %d-%d*%d on %s" % (ranks, coll, algo, lo, hi, factor,
                                           where)
    got = recorded(key, lambda: measure_perf(ranks, coll, algo, lo, hi,
                                              factor, hosts, reps))
    return {int(size): t for size, t in got.items()}


# Runs of the segment's algorithms: "shm" is selection's own (no
# HCOMM_ALGO); "shm_oneshot" one-shot at every size, "shm_twoshot" none
# (two-shot, then direct reads from their limit), by the one-shot limit.
SHM_ALGOS = {"shm": {}, "shm_oneshot": {"HCOMM_FAST_PATH_SMALL_MSG": "1G"},
             "shm_twoshot": {"HCOMM_FAST_PATH_SMALL_MSG": "0"}}


def measure_perf(ranks, coll, algo, lo, hi, factor, hosts, reps):
    env = dict(ENV, **SHM_ALGOS[algo]) if algo in SHM_ALGOS else dict(
        ENV, HCOMM_ALGO="%s=%s" % (coll, algo))
    # One host with a core a rank: each rank on its own core, and the
    # same cores from run to run (unbound, the 16-core host's record had
    # a 3-rank ring at 16 KiB slower than a 4-rank one); past the cores
    # (here), unbound, as binding refuses them.
    # Fake hosts are this host's ranks: they inherit env as its own do.
    local = not hosts or FAKE_HOSTS
    bound = local and ranks <= (os.cpu_count() or 1)
    cmd = ["mpirun", "-np", str(ranks)]
    cmd += (["--bind-to", "core", "--map-by", "core"] if bound
            else ["--bind-to", "none"])
    if hosts and FAKE_HOSTS:
        env.update(HCOMM_OVERRIDE_TOPO=fake_topo(hosts), UCX_TLS="tcp,self",
                   UCX_NET_DEVICES=os.environ.get("HCOMM_CALIB_NET_DEV",
                                                  "lo"))
    if not local:
        cmd += ["--host", hosts, "--mca", "plm_rsh_agent", AGENT,
                "--mca", "oob_tcp_if_include", NET + ".0/24",
                "--mca", "btl_tcp_if_include", NET + ".0/24",
                "-x", "UCX_TLS=tcp,self", "-x", "UCX_NET_DEVICES=eth0",
                "-x", "HCOMM_SPIN_COUNT=0", "-x", "HCOMM_ALGO",
                "-x", "HCOMM_TIMEOUT"]
    else:
        cmd += ["--oversubscribe"]
    cmd += [PERF, coll, "-b", str(lo), "-e", str(hi), "-f", str(factor),
            "--hcomm-only", "--json"]
    runs = {}
    for _ in range(reps or REPS):
        out = subprocess.run(cmd, env=env, capture_output=True, text=True,
                             timeout=900)
        if out.returncode != 0:
            raise RuntimeError("hcomm_perf failed: %s\n%s" %
                               (" ".join(cmd), out.stderr[-2000:]))
        for line in out.stdout.splitlines():
            if line.startswith("{"):
                row = json.loads(line)
                runs.setdefault(row["size"], []).append(
                    row["hcomm"]["time_us"])
    print("measured %s %s on %s: %s" %
          (coll, algo, hosts or "%d ranks" % ranks,
           {z: sorted(t) for z, t in runs.items()}), file=sys.stderr)
    return {size: min(t) for size, t in runs.items()}


FAKE_TOPOS = {}  # hosts -> HCOMM_OVERRIDE_TOPO file, removed at exit


def fake_topo(hosts):
    """HCOMM_OVERRIDE_TOPO's file for hosts ("name:ranks,..."): the ranks
    in order, each host's in a node of that name; written once."""
    if hosts not in FAKE_TOPOS:
        nodes, rank = [], 0
        for h in hosts.split(","):
            name, n = h.split(":")
            nodes.append({"name": name,
                          "ranks": list(range(rank, rank + int(n)))})
            rank += int(n)
        with tempfile.NamedTemporaryFile("w", suffix=".json",
                                         delete=False) as f:
            json.dump({"nodes": nodes}, f)
        FAKE_TOPOS[hosts] = f.name
        atexit.register(os.unlink, f.name)
    return FAKE_TOPOS[hosts]


def simulate(model, coll, algo, size, nodes=None, ppn=None, topo=None,
             env=None):
    """The simulator's time (us) a call, of CALLS back to back as
    hcomm_perf times them; env: HCOMM_* settings its selection of the
    segment's algorithms reads, as the library's does."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(dict(model, **(topo or {})), f)
        path = f.name
    try:
        cmd = [SIM, coll, "--topo", path, "-a", algo, "-b", str(size), "-e",
               str(size), "--calls", str(CALLS), "--json"]
        if nodes:
            cmd += ["--nodes", str(nodes), "--ppn", str(ppn)]
        row = json.loads(sh(*cmd, env=env).stdout.splitlines()[0])
    finally:
        os.unlink(path)
    if "error" in row:
        raise RuntimeError(row["error"])
    return row["time_us"]


def fit(model, path, target, nodes, ppn, size, lo, hi, log,
        algo="recursive_doubling"):
    """Bisection on one figure (model[path[0]][path[1]]...) until the
    simulated algo (nodes x ppn ranks) takes target us: the time grows
    with a latency or a cost and falls with a bandwidth or a speedup."""
    where = model
    for p in path[:-1]:
        where = where[p]
    grows = path[-1] in ("latency_us", "rendezvous_us", "copy_start_us",
                         "message_us", "call_us", "flag_us", "cma_us")
    for _ in range(24):  # to 2^-24 of the range: well below the noise
        mid = (lo * hi) ** 0.5 if log else (lo + hi) / 2
        where[path[-1]] = mid
        t = simulate(model, "allreduce", algo, size, nodes, ppn)
        if (t < target) == grows:
            lo = mid
        else:
            hi = mid
    return where[path[-1]]


def calibrate(model, level, measured, nodes, ppn, cache=False, tcp=False):
    """Each figure from the sizes it decides, as the median of the figures
    that reproduce each size alone: the latency from 8 to 512 B; the
    bandwidth from the sizes whose buffers overflow the cache; (cache) the
    speedup of 256 KiB, which fits in it; and the protocols' figures
    (copies_rendezvous(), copies() or eager_rendezvous(); socket_copies()
    for a level of UCX over TCP). Over TCP the small sizes decide the CPU
    each side spends a message (message_us) instead of a latency: the
    2-rank exchange cannot tell the two apart, but broadcasts back to back
    can, whose root sends the next call's message while the last one
    travels (2 fake hosts of 2 ranks, 1 KiB: 12.4 us measured, 19.7 with
    a latency, 10.2 with the sockets' CPU)."""
    if MEASURE_ONLY:
        return
    lv = model["levels"][level]
    lv["latency_us"], lv["bandwidth_GBps"] = 0.0, 10.0
    if tcp:
        lv["message_us"] = 0.0
    copy = model.get("copy_bytes", 0)
    if copy and copy <= model["eager_bytes"]:
        protocols = copies_rendezvous
        lv["copy_GBps"], lv["copy_start_us"] = 0.0, 0.0
        lv["rendezvous_us"] = 0.0
    elif copy:
        protocols = socket_copies if tcp else copies
        lv["copy_GBps"], lv["copy_start_us"] = 0.0, 0.0
    else:
        protocols = eager_rendezvous
        lv["eager_bandwidth_GBps"], lv["rendezvous_us"] = 0.0, 0.0

    def fitted(name, sizes, lo, hi, log, where=("levels", level)):
        return statistics.median(
            fit(model, where + (name,), measured[z], nodes, ppn, z,
                lo, max(hi, measured[z]) if not log else hi, log)
            for z in sizes)

    for _ in range(3):  # each figure moves the others' fits a little
        # over TCP: the sockets' CPU work on both sides (above)
        small = "message_us" if tcp else "latency_us"
        lv[small] = fitted(small, (8, 64, 512), 0.0, 1.0, False)
        protocols(model, lv, fitted, measured)
        lv["bandwidth_GBps"] = fitted("bandwidth_GBps",
                                      (2 << 20, 4 << 20, 16 << 20), 0.01,
                                      200.0, True)
        if cache:
            model["cpu"]["cached_speedup"] = fitted(
                "cached_speedup", (262144,), 0.2, 50.0, True, ("cpu",))


def written_lines(model, sizes):
    """The speed of a rendezvous that reads lines its sender wrote in the
    call, modified in the sender's core's cache, against the uncached rate
    (cross_speedup), where the call fits the cache: from 4 ranks'
    recursive doubling, whose second step reads the block its sender
    reduced in the first, at the largest size past copy_bytes that fits
    (256 KiB; it is the comparison's own run, so that row fits by
    construction). Not at 16 KiB as well, a rendezvous too: that left one
    cell fewer within 25% in the 16-core host's replay. The 2-rank fit
    cannot see it: its one step reads the sender's input, unchanged since
    the last call (hcomm_perf passes the same buffers every call)."""
    cap = model["cpu"]["cache_bytes"]
    fits = [z for z in sizes
            if model.get("copy_bytes", 0) < z and 2 * z <= cap]
    if MEASURE_ONLY or model["cores"] < 4 or not fits:
        return
    four = perf(4, "allreduce", "recursive_doubling", sizes[0], sizes[-1],
                sizes[1] // sizes[0])
    z = fits[-1]
    model["cpu"]["cross_speedup"] = fit(model, ("cpu", "cross_speedup"),
                                        four[z], 1, 4, z, 0.02, 1.0, True)


def several_fragments(model, measured, past=None):
    """The measured sizes that UCX copies in several fragments: past one
    fragment (or past, a level's zero-copy limit) up to copy_bytes."""
    one = model["eager_bytes"] if past is None else past
    return [z for z in measured if one < z <= model["copy_bytes"]]


def copies(model, lv, fitted, measured):
    """UCX's copy protocols past one fragment: up to copy_bytes, both CPUs
    copy a message at the CPU's own copy rate (UCX copies each fragment
    into and out of its shared memory: the level's copy_GBps stays 0), and
    past one fragment (eager_bytes) the multi-fragment protocol's receiver
    pays a fixed start, fitted from the sizes between (16 and 32 KiB).
    The rendezvous, past copy_bytes, has no size of its own to fit a cost
    from (256 KiB fits the cache's speedup): its handshake is one
    latency."""
    lv["copy_start_us"] = fitted("copy_start_us",
                                 several_fragments(model, measured), 0.0,
                                 1.0, False)


def socket_copies(model, lv, fitted, measured):
    """Over TCP UCX sends a message of up to TCP_ZCOPY_BYTES as one,
    from the sender's buffer (zcopy_bytes): the eager bandwidth from the
    sizes past the latency's up to it (4 and 16 KiB). Larger ones its
    copies take through the sockets in fragments: each side copies a
    message at the rate the connection takes it, one figure for the level
    (copy_GBps) fitted from the sizes past the zero-copy limit, with no
    start of its own."""
    lv["zcopy_bytes"] = TCP_ZCOPY_BYTES
    lv["eager_bandwidth_GBps"] = fitted("eager_bandwidth_GBps", (4096, 16384),
                                        0.01, 200.0, True)
    lv["copy_GBps"] = fitted(
        "copy_GBps", several_fragments(model, measured, TCP_ZCOPY_BYTES),
        0.01, 200.0, True)


def copies_rendezvous(model, lv, fitted, measured):
    """One eager fragment, copied by both CPUs up to copy_bytes (at the
    CPU's own copy rate: the level's copy_GBps stays 0), rendezvous past
    it: its cost from 16 and 32 KiB, the first sizes past one fragment
    (256 KiB fits the cache's speedup)."""
    lv["rendezvous_us"] = fitted("rendezvous_us", (16384, 32768), 0.0, 1.0,
                                 False)


def eager_rendezvous(model, lv, fitted, measured):
    """One eager limit (no copy protocols): the eager bandwidth (UCX's
    copies through bounce buffers) from 4 KiB; the rendezvous cost from
    32 KiB, the first size past eager_bytes."""
    lv["eager_bandwidth_GBps"] = fitted("eager_bandwidth_GBps", (4096,),
                                        0.01, 200.0, True)
    lv["rendezvous_us"] = fitted("rendezvous_us", (32768,), 0.0, 1.0, False)


def netns_up():
    sh("ip", "link", "add", TAG + "br", "type", "bridge")
    sh("ip", "addr", "add", NET + ".254/24", "dev", TAG + "br")
    sh("ip", "link", "set", TAG + "br", "up")
    for i, h in enumerate(HOSTS, 1):
        sh("ip", "netns", "add", h)
        sh("ip", "link", "add", h + "v", "type", "veth", "peer", "name",
           "eth0", "netns", h)
        sh("ip", "link", "set", h + "v", "master", TAG + "br", "up")
        sh("ip", "-n", h, "addr", "add", "%s.%d/24" % (NET, i), "dev", "eth0")
        sh("ip", "-n", h, "link", "set", "eth0", "up")
        sh("ip", "-n", h, "link", "set", "lo", "up")


def netns_down():
    for h in HOSTS:
        sh("ip", "netns", "del", h, check=False)
    sh("ip", "link", "del", TAG + "br", check=False)


def compare(rows, model, label, ranks, coll, algos, sizes, hosts=None,
            nodes=None, ppn=None, topo=None):
    for algo in algos:
        got = perf(ranks, coll, algo, sizes[0], sizes[-1],
                   sizes[1] // sizes[0], hosts)
        for size in sizes if not MEASURE_ONLY else ():
            pred = simulate(model, coll, algo, size, nodes, ppn, topo)
            rows.append((label, coll, algo, size, got[size], pred))
            print("%-22s %-9s %-18s %9d %10.1f %10.1f %5.2f" %
                  (label, coll, algo, size, got[size], pred,
                   pred / got[size]), file=sys.stderr, flush=True)


def save_figures(name, model):
    if MEASURE_ONLY:
        return  # nothing fitted
    with open(os.path.join(OUTDIR, name), "w") as f:
        json.dump(model, f, indent=2)
        f.write("\n")


def size_name(z):
    return "%d MiB" % (z >> 20) if z >= 1 << 20 else "%d KiB" % (z >> 10)


def us(t):
    return "%.0f" % t if t >= 100 else "%.1f" % t


def print_wide(rows):
    """The rows as README's table: measured / predicted (ratio) a size."""
    sizes = sorted({r[3] for r in rows})
    lines = {}
    for label, coll, algo, size, got, pred in rows:
        lines.setdefault((label, coll, algo), {})[size] = (
            "%s / %s (%.2f)" % (us(got), us(pred), pred / got))
    print("| shape | collective | algorithm | %s |" %
          " | ".join(size_name(z) for z in sizes))
    print("| --- | --- | --- |%s" % (" ---: |" * len(sizes)))
    for (label, coll, algo), cells in lines.items():
        print("| %s | %s | `%s` | %s |" % (label, coll, algo, " | ".join(
            cells.get(z, "-") for z in sizes)))


def l2_bytes():
    """A rank's cache: its core's L2, as Linux reports it."""
    try:
        with open("/sys/devices/system/cpu/cpu0/cache/index2/size") as f:
            text = f.read().strip()
        return int(text.rstrip("KM")) << (20 if text.endswith("M") else 10)
    except (OSError, ValueError):
        return 1 << 20


def two_ranks(sizes, hosts=None):
    """Every 2-rank recursive doubling of this host (or of hosts): the
    sweep, and the sizes that only the comparison's sizes have (16 KiB,
    past one fragment: with 32 KiB it decides the rendezvous cost, the
    multi-fragment start or the sockets' copy rate); where both have a
    size, the sweep's, which the figures have always been fitted from."""
    table = perf(2, "allreduce", "recursive_doubling", sizes[0], sizes[-1],
                 sizes[1] // sizes[0], hosts)
    table.update(
        perf(2, "allreduce", "recursive_doubling", 8, 16 << 20, 8, hosts))
    return table


def main_shm():
    """--shm: selection's own algorithms on one host, a core a rank. The
    segment's figures are fitted from the 2-rank runs, each from the
    sizes it decides (as calibrate() does the plans'), and every
    algorithm compared at every rank count. The CPU's rates are this
    host's (--measure-cpu); the cache's speedup is fitted here, for the
    segment's own copies."""
    cpu = recorded("cpu", lambda: json.loads(sh(SIM, "--measure-cpu").stdout))
    l2 = recorded("l2", l2_bytes)
    cores = recorded("cores", os.cpu_count)
    ranks = [n for n in (2, 4, 8, 16) if n <= cores]
    got = {}
    for n in ranks:
        for algo in SHM_ALGOS:
            got[n, algo] = perf(n, "allreduce", algo, 8, 16 << 20, 2)
        got[n, "bcast"] = perf(n, "bcast", "shm", 8, 16 << 20, 2)
    if MEASURE_ONLY:
        return
    model = {"nodes": 1, "ranks_per_node": 2,
             "cpu": {"reduce_GBps": cpu["reduce_GBps"],
                     "copy_GBps": cpu["copy_GBps"], "cache_bytes": l2,
                     "cached_speedup": 1.0},
             "shm": {"call_us": 0.0, "flag_us": 0.0, "peer_speedup": 1.0,
                     "cma_us": 0.0, "cma_GBps": 10.0}}

    def fitted(name, n, algo, sizes, lo, hi, log, where="shm", runs=None):
        return statistics.median(
            fit(model, (where, name), got[n, runs or algo][z], 1, n, z, lo,
                hi, log, algo) for z in sizes)

    small = (8, 16, 32, 64)
    for _ in range(3):  # each figure moves the others' fits a little
        model["shm"]["call_us"] = fitted("call_us", 2, "shm_oneshot", small,
                                         0.0, 5.0, False)
        # a peer's flag: what two-shot's second round of flags adds at 2
        # ranks, where its copies are of a few bytes
        model["shm"]["flag_us"] = fitted("flag_us", 2, "shm_twoshot",
                                         small, 0.0, 5.0, False)
        # a peer's lines from its core: buffers past the cache
        model["shm"]["peer_speedup"] = fitted(
            "peer_speedup", 2, "shm_oneshot", (4 << 20, 16 << 20), 0.01,
            100.0, True)
        # the cache's speedup where a call's buffers fit in it
        model["cpu"]["cached_speedup"] = fitted(
            "cached_speedup", 2, "shm_oneshot", (262144,), 0.2, 50.0, True,
            "cpu")
        # direct reads: where selection takes them at 2 ranks
        model["shm"]["cma_GBps"] = fitted("cma_GBps", 2, "shm_cma",
                                          (4 << 20, 16 << 20), 0.1, 200.0,
                                          True, runs="shm")
        model["shm"]["cma_us"] = fitted("cma_us", 2, "shm_cma",
                                        (262144, 524288), 0.0, 50.0, False,
                                        runs="shm")
    save_figures("hcomm_sim_shm.json", model)
    rows = []
    for n in ranks:
        for algo in SHM_ALGOS:
            for size in (1024, 16384, 262144, 4 << 20):
                # selection's own, under the run's settings
                pred = simulate(model, "allreduce", "shm", size, 1, n,
                                env=SHM_ALGOS[algo])
                rows.append(("1 host x %d" % n, "allreduce", algo, size,
                             got[n, algo][size], pred))
        for size in (1024, 16384, 262144, 4 << 20):
            rows.append(("1 host x %d" % n, "bcast", "shm", size,
                         got[n, "bcast"][size],
                         simulate(model, "bcast", "shm", size, 1, n)))
    inside = sum(1 for r in rows if abs(r[5] / r[4] - 1) <= 0.25)
    print("\n%d of %d within 25%%\n" % (inside, len(rows)))
    print_wide(rows)


def main():
    if SHM:
        return main_shm()
    cpu = recorded("cpu", lambda: json.loads(sh(SIM, "--measure-cpu").stdout))
    l2 = recorded("l2", l2_bytes)
    base = {"nodes": 1, "ranks_per_node": 2, "rails": 1,
            "cores": recorded("cores", os.cpu_count),
            "levels": {"node": {}, "nic": {}, "switch": {}},
            "cpu": {"reduce_GBps": cpu["reduce_GBps"],
                    "copy_GBps": cpu["copy_GBps"], "overhead_us": 0.3,
                    "cache_bytes": l2, "cached_speedup": 1.0,
                    # the fit's copies are between its 2 ranks: the
                    # speedup holds for copies between such pairs only
                    "cache_ranks": 2}}
    base["eager_bytes"], copy = protocol()
    if copy:
        base["copy_bytes"] = copy
    base["chunk_bytes"] = 1 << 20
    rows = []
    sizes = [1024, 16384, 262144, 4 << 20]
    # --- one host: UCX shared memory ---------------------------------------
    here = json.loads(json.dumps(base))
    calibrate(here, "node", two_ranks(sizes), 1, 2, cache=True)
    written_lines(here, sizes)
    save_figures("hcomm_sim_here.json", here)
    for n in (2, 3, 4, 8):
        compare(rows, here, "1 host x %d" % n, n, "allreduce",
                ["ring", "recursive_doubling", "rabenseifner"], sizes,
                nodes=1, ppn=n)
    # --- namespace (or fake) hosts: UCX over TCP ---------------------------
    try:
        if NETNS and not REPLAY:
            netns_up()
    except (subprocess.CalledProcessError, OSError) as e:
        print("no network namespaces here (%s): one host only" %
              getattr(e, "stderr", e), file=sys.stderr)
        netns_down()
        NETNS_OK = False
    else:
        mark = " on faken" if FAKE_HOSTS else " on nsn"
        NETNS_OK = (NETNS or FAKE_HOSTS) and (
            not REPLAY or any(mark in k for k in MEASURED))
    try:
        if not NETNS_OK:
            raise StopIteration
        h = HOSTS
        ns = json.loads(json.dumps(base))
        ns["cpu"] = dict(here["cpu"])  # the same CPUs and caches
        # but over TCP no CPU reads another's cache in place (CMA): the
        # sockets copy, so neither a cache-sharing pair's copies nor lines
        # written in the call (cross_speedup) change a message's speed
        ns["cpu"]["cache_ranks"] = 0
        calibrate(ns, "node", two_ranks(sizes, "%s:2" % h[0]), 1, 2,
                  tcp=True)
        calibrate(ns, "nic", two_ranks(sizes, "%s:1,%s:1" % (h[0], h[1])),
                  2, 1, tcp=True)
        save_figures("hcomm_sim_fakehosts.json" if FAKE_HOSTS else
                     "hcomm_sim_netns.json", ns)
        uneven = {"nodes": [{"ranks": [0, 1]}, {"ranks": [2, 3]},
                            {"ranks": [4]}]}
        uneven_model = {k: v for k, v in ns.items() if k != "ranks_per_node"}
        ar = ["recursive_doubling", "ring", "rabenseifner", "hierarchical",
              "hierarchical_rhd"]
        bc = ["binomial", "hierarchical", "hierarchical_tree"]
        for coll, algos in (("allreduce", ar), ("bcast", bc)):
            compare(rows, ns, "2 hosts x 2", 4, coll, algos, sizes,
                    hosts="%s:2,%s:2" % (h[0], h[1]), nodes=2, ppn=2)
            compare(rows, uneven_model, "3 hosts: 2+2+1", 5, coll, algos,
                    sizes, hosts="%s:2,%s:2,%s:1" % tuple(h), topo=uneven)
    except StopIteration:
        pass
    finally:
        if NETNS and NETNS_OK and not REPLAY:
            netns_down()
    print("| shape | collective | algorithm | size | measured (us) | "
          "predicted (us) | predicted / measured |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: |")
    for label, coll, algo, size, got, pred in rows:
        print("| %s | %s | %s | %d | %.1f | %.1f | %.2f |" %
              (label, coll, algo, size, got, pred, pred / got))
    inside = sum(1 for r in rows if abs(r[5] / r[4] - 1) <= 0.25)
    print("\n%d of %d within 25%%\n" % (inside, len(rows)))
    print_wide(rows)


if __name__ == "__main__":
    # A kill still takes the namespaces down (main's finally).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    for _ in range(PASSES if MEASURE_ONLY else 1):
        FRESH.clear()
        main()
