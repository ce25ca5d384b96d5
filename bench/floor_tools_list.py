"""The floor: the least a client can do to list a stdio server's tools, standard library only.
Spawn, initialize, initialized, tools/list, print, close stdin, terminate."""

import json
import subprocess
import sys

proc = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)


def rpc(msg):
    proc.stdin.write((json.dumps(msg) + "\n").encode())
    proc.stdin.flush()


def wait_for(ident):
    for line in proc.stdout:
        msg = json.loads(line)
        if msg.get("id") == ident:
            return msg


rpc({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "floor", "version": "0"}}})
wait_for(1)
rpc({"jsonrpc": "2.0", "method": "notifications/initialized"})
rpc({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
print(json.dumps(wait_for(2)["result"]["tools"]))
proc.stdin.close()
proc.terminate()
proc.wait()
