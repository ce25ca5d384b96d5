"""A hand-written stdio MCP server (initialize era) whose replies carry lone surrogates: JSON
escapes such as "\\ud800" without their pair, which decode to text no UTF-8 writer accepts.

Each tool puts one in a different place of its reply; `echo` behaves (the batch next to it must
still work). Raw JSON-RPC on purpose: the SDK would refuse to write such text.
"""

from __future__ import annotations

import json
import sys

LONE = "\ud800"  # json.dumps (ensure_ascii) writes it as the escape \ud800

# tool name -> what it answers to tools/call: a result, or an "error" object
REPLIES: dict[str, dict] = {
    "text": {"content": [{"type": "text", "text": f"bad {LONE} text"}]},
    "key": {"content": [{"type": "text", "text": "ok"}], "structuredContent": {f"k{LONE}": 1}},
    "low": {"content": [{"type": "text", "text": "\udfff alone"}], "isError": True},
    "rpc_error": {"error": {"code": -32000, "message": f"failed {LONE} here", "data": {"x": LONE}}},
}
OBJECT = {"type": "object", "properties": {"message": {"type": "string"}}}
TOOLS = [
    {
        "name": name,
        "description": f"answers with a lone surrogate ({name})",
        "inputSchema": OBJECT,
        "annotations": {"readOnlyHint": True},
    }
    for name in REPLIES
]
# Replies nested 900 deep (under the parser's limit, far past anything sane), in a result and in
# an error's data: they must become one clear error, not a RecursionError in whatever walks them.
DEEP: object = "bottom"
for _ in range(900):
    DEEP = [DEEP]
DEEP_REPLIES: dict[str, dict] = {
    "deep": {"content": [{"type": "text", "text": "deep"}], "structuredContent": {"v": DEEP}},
    "deep_rpc_error": {"error": {"code": -32000, "message": "deep", "data": DEEP}},
}
REPLIES.update(DEEP_REPLIES)
TOOLS += [
    {
        "name": name,
        "description": f"answers nested 900 deep ({name})",
        "inputSchema": OBJECT,
        "annotations": {"readOnlyHint": True},
    }
    for name in DEEP_REPLIES
]
# Replies nested 5,000 deep, past what the JSON parser itself takes (~1,000): written as text
# (json.dumps would not write them either). They must be an error for their call, not a line
# dropped as garbage that leaves the call waiting until its timeout.
DEEPER = "[" * 5000 + "]" * 5000
RAW_REPLIES = {
    "deeper": '"result": {"content": [{"type": "text", "text": "deeper"}], "structuredContent": {"v": DEEP}}'.replace(
        "DEEP", DEEPER
    ),
    "deeper_rpc_error": '"error": {"code": -32000, "message": "deeper", "data": DEEP}'.replace("DEEP", DEEPER),
}
TOOLS += [
    {
        "name": name,
        "description": f"answers nested 5000 deep ({name})",
        "inputSchema": OBJECT,
        "annotations": {"readOnlyHint": True},
    }
    for name in RAW_REPLIES
]
TOOLS.append({"name": "echo", "description": "Echo", "inputSchema": OBJECT, "annotations": {"readOnlyHint": True}})


def send(message: dict) -> None:
    sys.setrecursionlimit(5000)  # json.dumps of DEEP
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        method, ident = message.get("method"), message.get("id")
        if ident is None:
            continue  # notifications
        if method == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile", "version": "0"},
            }
        elif method == "tools/list":
            result = {"tools": TOOLS}
        elif method == "tools/call":
            name = message["params"]["name"]
            if name in RAW_REPLIES:
                sys.stdout.write('{"jsonrpc": "2.0", "id": ' + json.dumps(ident) + ", " + RAW_REPLIES[name] + "}\n")
                sys.stdout.flush()
                continue
            if name == "echo":
                result = {"content": [{"type": "text", "text": str(message["params"].get("arguments", {}).get("message"))}]}
            else:
                # A log notification with a lone surrogate first: it must not break anything either.
                send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": f"log {LONE}"}})
                reply = REPLIES[name]
                if "error" in reply:
                    send({"jsonrpc": "2.0", "id": ident, **reply})
                    continue
                result = reply
        else:
            send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": "Method not found"}})
            continue
        send({"jsonrpc": "2.0", "id": ident, "result": result})


if __name__ == "__main__":
    main()
