"""The gateway's two thread hops of a call, alone: a request on the (uv)loop handed to a worker
thread (SimpleQueue, as gateway/workpool.py), which hands a reply back (call_soon_threadsafe, as
asgi.Outbox) resolving the loop's future; against the same done inline on the loop. Sequential,
like the bench's sequential calls; wall median and the process's CPU per round trip.

    .venv/bin/python bench/gateway_hop.py 5000
"""
import asyncio, os, statistics, sys, threading, time
from queue import SimpleQueue
import uvloop
N = int(sys.argv[1])
jobs = SimpleQueue()
def worker():
    while True:
        job = jobs.get()
        job()
threading.Thread(target=worker, daemon=True).start()
async def main():
    loop = asyncio.get_running_loop()
    hop, inline, cpu_hop, cpu_inline = [], [], 0.0, 0.0
    for i in range(N):
        fut = loop.create_future()
        def job(fut=fut):
            loop.call_soon_threadsafe(fut.set_result, None)
        c = time.process_time(); t = time.perf_counter()
        jobs.put(job)
        await fut
        hop.append(time.perf_counter() - t); cpu_hop += time.process_time() - c
        fut = loop.create_future()
        c = time.process_time(); t = time.perf_counter()
        loop.call_soon(fut.set_result, None)
        await fut
        inline.append(time.perf_counter() - t); cpu_inline += time.process_time() - c
    print(f"load {os.getloadavg()[0]:.1f}: hop median {statistics.median(hop)*1e6:.0f} us (p90 {sorted(hop)[int(N*.9)]*1e6:.0f}), "
          f"process CPU {cpu_hop/N*1e6:.0f} us; inline {statistics.median(inline)*1e6:.1f} us, CPU {cpu_inline/N*1e6:.1f} us")
uvloop.run(main())
