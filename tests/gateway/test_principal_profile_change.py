"""A principal's profile is re-read with the served profile's principals (its file changed): a
host session it opened under the old profile ends (404, the host starts a new session) rather
than go on calling under the old profile's policy until it idles out, which an operator who
narrowed the principal's profile would not expect (a new session, or a 2026-07-28 request,
already got the new one). Through the gateway served in process, the SDK test server over stdio."""

from __future__ import annotations

import http.client
import json
import os
import sys
from pathlib import Path
from typing import Any

from tests.gateway.test_http import start, stop
from tests.helpers import PEERS

SERVER = (
    f"[servers.sdk]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(PEERS / 'sdk_server.py'))}]\n"
    'sandbox = "none"  # confinement is tested in tests/sandbox\n\n[policy.hints."sdk.echo"]\nreadOnly = true\n'
)
PRINCIPAL = '\n[serve.principals.alice]\ntoken_env = "GW_ALICE"\n'
TOKEN = "alice-token-0123456789abcdef"


def test_a_session_does_not_outlive_its_principals_profile(tmp_path: Path) -> None:
    profiles = Path(os.environ["LLMC_CONFIG_DIR"]) / "profiles"
    profiles.mkdir(parents=True)
    (profiles / "guest.toml").write_text(SERVER + '\n[policy]\ndeny = ["sdk.echo"]\n')
    served = tmp_path / "served.toml"
    served.write_text(SERVER + PRINCIPAL)
    running = start(served, env={"GW_ALICE": TOKEN})
    conn = http.client.HTTPConnection("127.0.0.1", running.port, timeout=60)

    def post(body: dict[str, Any], session: str | None = None) -> tuple[int, str | None, dict[str, Any] | None]:
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        headers["Authorization"] = f"Bearer {TOKEN}"
        if session:
            headers["Mcp-Session-Id"] = session
        conn.request("POST", "/mcp", body=json.dumps(body), headers=headers)
        response = conn.getresponse()
        data = response.read()
        if response.getheader("Content-Type") == "text/event-stream":  # a call's reply: its last data line
            data = [line for line in data.splitlines() if line.startswith(b"data: ")][-1][len(b"data: ") :]
        return response.status, response.getheader("Mcp-Session-Id"), json.loads(data) if data else None

    def open_session() -> str:
        info = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "h", "version": "1"}}
        status, session, _ = post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": info})
        assert status == 200 and session
        assert post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)[0] == 202
        return session

    echo = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "sdk.echo", "arguments": {"message": "hi"}}}
    try:
        session = open_session()
        status, _, reply = post(echo, session)
        assert status == 200 and reply is not None and reply["result"]["content"][0]["text"] == "hi", reply
        served.write_text(SERVER + PRINCIPAL + 'profile = "guest"\n')  # alice is served guest from now on
        status, _, reply = post(echo, session)
        assert status == 404, reply  # before the fix: 200, the call ran under the old profile
        status, _, reply = post(echo, open_session())
        assert status == 200 and reply is not None and reply["error"]["message"] == "Unknown tool: sdk.echo", reply
    finally:
        conn.close()
        stop(running)
