"""The client command the official conformance suite runs for its authorization scenarios.

The suite appends the server URL, names the scenario in MCP_CONFORMANCE_SCENARIO and may pass
pre-registered credentials in MCP_CONFORMANCE_CONTEXT. Everything goes through the installed
`llmc`: a profile with the server (and its [oauth] table) in a fresh config directory, then
`llmc tools list` and `llmc call` as a user would run them. The browser step is headless:
BROWSER points at tests/auth/browser.py, which follows the authorization redirect.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

LLMC = str(Path(sys.executable).parent / "llmc")
BROWSER = str(Path(__file__).resolve().parent.parent / "auth" / "browser.py")
# The client ID metadata document URL the suite expects (auth/basic-cimd); an authorization
# server that does not advertise client_id_metadata_document_supported never sees it.
CIMD_URL = "https://conformance-test.local/client-metadata.json"
SECRET_ENV = "CONFORMANCE_CLIENT_SECRET"


def profile_text(url: str, context: dict[str, str], scenario: str) -> str:
    lines = [
        "[servers.srv]",
        f"url = {json.dumps(url)}",
        "",
        "[servers.srv.oauth]",
        f"client_metadata_url = {json.dumps(CIMD_URL)}",
    ]
    if scenario.startswith("auth/client-credentials"):
        lines.append('grant = "client_credentials"')  # a machine-to-machine profile
    if context.get("client_id"):
        lines.append(f"client_id = {json.dumps(context['client_id'])}")
    if context.get("client_secret"):
        lines.append(f"client_secret_env = {json.dumps(SECRET_ENV)}")
    return "\n".join(lines) + "\n"


def main() -> int:
    if len(sys.argv) < 2:
        sys.exit("auth_client: expected the server URL as the last argument")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    with tempfile.TemporaryDirectory(prefix="llmc-auth-conformance-") as tmp:  # fresh tokens every time
        return run(Path(tmp), profile_text(sys.argv[-1], context, scenario), context)


def run(home: Path, profile: str, context: dict[str, str]) -> int:
    (home / "config" / "profiles").mkdir(parents=True)
    (home / "config" / "profiles" / "conformance.toml").write_text(profile)
    env = {**os.environ, "LLMC_CONFIG_DIR": str(home / "config"), "LLMC_STATE_DIR": str(home / "state"), "BROWSER": BROWSER}
    if context.get("client_secret"):
        env[SECRET_ENV] = context["client_secret"]
    for command in (["tools", "list", "-s", "srv"], ["call", "srv.test-tool"]):
        code = subprocess.run([LLMC, "-p", "conformance", *command], env=env, timeout=120).returncode
        if code:
            return code  # stop at the first failure, as a script would (auth/scope-retry-limit counts attempts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
