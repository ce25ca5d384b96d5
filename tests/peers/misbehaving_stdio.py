"""A stdio MCP server (legacy era, hand-written) that misbehaves on purpose, one way per mode.

Usage: python misbehaving_stdio.py MODE
  good          behaves: initialize, tools/list, tools/call echo
  paginate      tools/list in 5 pages of 3 tools
  crash         exits in the middle of tools/call
  garbage       prints non-JSON lines on stdout before every reply
  silent        answers initialize, then never answers anything
  out-of-order  holds replies and sends them in reverse order
  lie-cursor    tools/list repeats the same cursor forever
  lie-result    tools/list result has no tools list
  bad-version   answers initialize with protocol version 1999-01-01
  hang-on-exit  ignores stdin EOF and SIGTERM (needs SIGKILL)
  linger        ignores stdin EOF; on SIGTERM writes to the file $LINGER_LOG whether its stdin
                had ended by then ("term after eof" or "term before eof") and exits with status 3
  busy-exit     on stdin EOF works (CPU) for 2 s before it exits: a slow exit, not a linger
  fork          spawns a grandchild that would outlive it
  huge-line     answers tools/call with a line that does not end (4 MB, then exits)
  faults        tools/call echo misbehaves as its message says: wrong-id (a reply to an id never
                sent, then the right one), string-id (the id echoed as a string), not-object (a
                result that is no object), no-version (a reply without "jsonrpc", then the right
                one), deep (a result nested 200 levels), surrogate (a lone surrogate escaped),
                chatty (a log message, progress and a ping before the reply), error (a JSON-RPC
                error), die (half a reply, then exits); any other message: echoed
  versions V,.. answers server/discover with UnsupportedProtocolVersion (-32022) listing the
                versions V (comma-separated); initialize agrees on the first of them
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time

MODE = sys.argv[1] if len(sys.argv) > 1 else "good"
VERSIONS = sys.argv[2].split(",") if MODE == "versions" and len(sys.argv) > 2 else []
# TOOL_DESCRIPTION lets a test change the manifest between runs (drift, tool poisoning).
TOOL = {
    "name": "echo",
    "description": os.environ.get("TOOL_DESCRIPTION", "Echo"),
    "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}},
}


def send(msg: dict) -> None:
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def reply(msg: dict, result: dict) -> None:
    if MODE == "garbage":
        sys.stdout.write("Server starting... not JSON\n")
    send({"jsonrpc": "2.0", "id": msg["id"], "result": result})


def main() -> None:
    if MODE == "hang-on-exit":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if MODE == "linger":
        signal.signal(signal.SIGTERM, on_term)
    if MODE == "fork":
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    held: list[dict] = []
    for line in sys.stdin:
        msg = json.loads(line)
        method, ident = msg.get("method"), msg.get("id")
        if ident is None or method is None:
            continue  # notifications, and the client's answers (to the ping of "chatty")
        if method == "initialize":
            version = "1999-01-01" if MODE == "bad-version" else msg["params"]["protocolVersion"]
            if VERSIONS:
                version = msg["params"]["protocolVersion"] if msg["params"]["protocolVersion"] in VERSIONS else VERSIONS[0]
            reply(
                msg,
                {
                    "protocolVersion": version,
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": f"misbehaving-{MODE}", "version": "0"},
                },
            )
        elif method == "server/discover" and VERSIONS:
            requested = ((msg.get("params") or {}).get("_meta") or {}).get("io.modelcontextprotocol/protocolVersion")
            send(
                {
                    "jsonrpc": "2.0",
                    "id": ident,
                    "error": {
                        "code": -32022,
                        "message": "Unsupported protocol version",
                        "data": {"supported": VERSIONS, "requested": requested},
                    },
                }
            )
        elif method == "server/discover" or MODE == "silent":
            if method == "server/discover":
                send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": "Method not found"}})
        elif method == "tools/list":
            cursor = (msg.get("params") or {}).get("cursor")
            if MODE == "lie-cursor":
                reply(msg, {"tools": [TOOL], "nextCursor": "again"})
            elif MODE == "lie-result":
                reply(msg, {"tools": "none"})
            elif MODE == "paginate":
                page = int(cursor or 0)
                tools = [{**TOOL, "name": f"tool{page * 3 + i}"} for i in range(3)]
                reply(msg, {"tools": tools, **({"nextCursor": str(page + 1)} if page < 4 else {})})
            else:
                reply(msg, {"tools": [TOOL]})
        elif method == "tools/call":
            if MODE == "huge-line":
                try:
                    sys.stdout.write(
                        '{"jsonrpc": "2.0", "id": ' + format(ident, "d") + ', "result": {"content": [{"type": "text", "text": "'
                    )
                    for _ in range(64):
                        sys.stdout.write("x" * 65536)
                    sys.stdout.flush()
                except BrokenPipeError:
                    pass
                os._exit(0)
            if MODE == "crash":
                sys.stderr.write("fatal: simulated crash in tools/call\n")
                sys.stderr.flush()
                os._exit(7)
            text = (msg["params"].get("arguments") or {}).get("message", "")
            result = {"jsonrpc": "2.0", "id": ident, "result": {"content": [{"type": "text", "text": text}]}}
            if MODE == "faults":
                result = fault(msg, text, result)
            if MODE == "out-of-order":
                held.append(result)
                if len(held) == 3:
                    for r in reversed(held):
                        send(r)
                    held.clear()
            elif result:
                send(result)
            else:
                sys.stdout.flush()
        elif method == "ping":
            reply(msg, {})
        else:
            send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": "Method not found"}})
    if MODE in ("hang-on-exit", "linger"):
        time.sleep(300)
    if MODE == "busy-exit":
        until = time.monotonic() + 2.0
        while time.monotonic() < until:
            pass


def fault(msg: dict, text: str, result: dict) -> dict:
    """What mode "faults" sends for the call `msg` before (or instead of) `result`, by its text."""
    ident = msg["id"]
    if text == "wrong-id":
        send({**result, "id": ident + 1000})
    elif text == "string-id":
        return {**result, "id": str(ident)}
    elif text == "not-object":
        return {**result, "result": "not an object"}
    elif text == "no-version":
        send({"id": ident, "result": result["result"]})
    elif text == "deep":
        deep: object = "bottom"
        for _ in range(200):
            deep = [deep]
        return {**result, "result": {"content": [], "structuredContent": {"deep": deep}}}
    elif text == "surrogate":
        sys.stdout.write(
            '{"jsonrpc": "2.0", "id": ' + str(ident) + ', "result": {"content": [{"type": "text", "text": "\\ud800"}]}}\n'
        )
        return {}
    elif text == "chatty":
        token = (msg["params"].get("_meta") or {}).get("progressToken")
        send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "working"}})
        send({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": 1}})
        send({"jsonrpc": "2.0", "id": f"ping-{ident}", "method": "ping"})
    elif text == "error":
        return {"jsonrpc": "2.0", "id": ident, "error": {"code": -32000, "message": "it broke"}}
    elif text == "die":
        sys.stdout.write('{"jsonrpc": "2.0", "id": ' + str(ident) + ', "res')
        sys.stdout.flush()
        sys.stderr.write("fatal: died mid-reply\n")
        sys.stderr.flush()
        os._exit(9)
    return result


def on_term(*_: object) -> None:
    # The pipe's end persists: stdin is readable and reads nothing once the client closed it.
    ended = bool(select.select([0], [], [], 0)[0]) and os.read(0, 65536) == b""
    with open(os.environ["LINGER_LOG"], "a") as log:
        log.write(f"term {'after' if ended else 'before'} eof\n")
    os._exit(3)


if __name__ == "__main__":
    main()
