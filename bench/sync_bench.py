"""What making an audit append durable costs on this disk, the ways interleaved one append each in
turn (so load drifts over all alike): write + fsync, write + fdatasync, an O_DSYNC descriptor, and
fdatasync of an overwrite inside a file written in full beforehand (no size change: a preallocated
log). Files in a temporary directory under $HOME (the state directory's disk).

    python3 bench/sync_bench.py 3000
"""
import os, time, statistics, sys, tempfile, shutil
d = tempfile.mkdtemp(dir=os.path.expanduser("~"))
rec = b'x' * 700 + b'\n'
N = int(sys.argv[1])
fds = {
 "fsync": os.open(os.path.join(d, "a"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600),
 "fdatasync": os.open(os.path.join(d, "b"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600),
 "O_DSYNC": os.open(os.path.join(d, "c"), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_DSYNC, 0o600),
}
pre = os.open(os.path.join(d, "d"), os.O_RDWR | os.O_CREAT, 0o600); os.write(pre, b"\0" * (N * 800 + 4096)); os.fsync(pre); os.lseek(pre, 0, 0)
ops = {
 "fsync": lambda: (os.write(fds["fsync"], rec), os.fsync(fds["fsync"])),
 "fdatasync": lambda: (os.write(fds["fdatasync"], rec), os.fdatasync(fds["fdatasync"])),
 "O_DSYNC": lambda: os.write(fds["O_DSYNC"], rec),
 "prewritten+fdatasync": lambda: (os.write(pre, rec), os.fdatasync(pre)),
}
wall = {k: [] for k in ops}; cpu = {k: [] for k in ops}
for _ in range(N):
    for k, f in ops.items():
        c = time.thread_time(); t = time.perf_counter(); f(); wall[k].append(time.perf_counter() - t); cpu[k].append(time.thread_time() - c)
print("load", os.getloadavg())
for k in ops:
    print(f"{k:22} wall median {statistics.median(wall[k])*1e3:.3f} ms  p90 {sorted(wall[k])[int(N*.9)]*1e3:.3f}  cpu mean {statistics.mean(cpu[k])*1e6:.0f} us")
shutil.rmtree(d)
