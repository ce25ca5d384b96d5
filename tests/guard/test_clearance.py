"""Classification and clearance through every caller: a person's `llmc call` (unrestricted unless
[policy] clearance), `policy check`, `ask` (the model: [llm] clearance, default internal; the
providers' wire fakes through their real SDKs), and the gateway (a real `mcp` SDK host over stdio,
and two principals over HTTP). A server above the caller's clearance: its tools not offered, its
resources and prompts not listed, a direct call denied (exit 4, rule "clearance" in the audit).
DLP applies on the way to the model and to a gateway host too."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from tests.fakes.llm import FakeLLM
from tests.fakes.scripts import sent_results, turn
from tests.gateway.test_http import sdk_host, start, stop
from tests.gateway.test_stdio import host, run
from tests.helpers import audit_trail, llmc, profile_file, sdk_server
from tests.peers import leaky_records as peer


def servers(classification: str = "confidential", sandbox: bool = False) -> str:
    leaky, library = sdk_server("leaky_records.py")[1], sdk_server("sdk_library.py")[1]
    none = 'sandbox = "none"\n' if sandbox else ""
    return (
        f'[servers.crm]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(leaky)}]\nclassification = "{classification}"\n{none}'
        f"\n[servers.lib]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(library)}]\n{none}"
    )


def decisions(state: Path) -> list[dict[str, Any]]:
    return [r for r in audit_trail(state) if r.get("event") == "decision"]


# -- a person -------------------------------------------------------------------------------------


@pytest.mark.usefixtures("isolated_dirs")
def test_a_person_is_unrestricted_unless_policy_clearance_says(isolated_dirs: Path) -> None:
    profile_file(isolated_dirs / "config", servers("restricted"))
    assert llmc("call", "crm.status").returncode == 0
    check = llmc("policy", "check", "crm.status")
    assert check.returncode == 0 and check.json()["classification"] == "restricted"
    assert check.json()["clearance"] == "restricted"

    profile_file(isolated_dirs / "config", servers("restricted") + '\n[policy]\nclearance = "confidential"\n')
    proc = llmc("call", "crm.status")
    assert proc.returncode == 4
    assert "classified restricted, above the caller's clearance (confidential)" in proc.stderr and "[clearance]" in proc.stderr
    record = decisions(isolated_dirs / "state")[-1]
    assert record["decision"] == "deny" and record["rule"] == "clearance"
    listed = llmc("tools", "list", "--format", "json")
    assert listed.returncode == 0
    assert {t["server"] for t in listed.json()["tools"]} == {"lib"}
    resources = llmc("resources", "list", "--format", "json")
    assert all(r["server"] != "crm" for r in resources.json()["resources"])
    read = llmc("resources", "read", "crm.crm://customers")
    assert read.returncode == 4 and peer.EMAIL not in read.stdout
    check = llmc("policy", "check", "crm.status")
    assert check.returncode == 4
    assert check.json()["rule"] == "clearance" and check.json()["clearance"] == "confidential"
    model = llmc("policy", "check", "lib.search", "query=x", "--caller", "model")
    assert model.json()["clearance"] == "internal" and model.json()["classification"] == "internal"


@pytest.mark.parametrize(
    "text, message",
    [
        ('[servers.x]\ncommand = "x"\nclassification = "secret"\n', "classification"),
        ('[llm]\nclearance = "top"\n', "clearance"),
    ],
)
@pytest.mark.usefixtures("isolated_dirs")
def test_unknown_levels_are_config_errors(isolated_dirs: Path, text: str, message: str) -> None:
    profile_file(isolated_dirs / "config", text)
    proc = llmc("tools", "list")
    assert proc.returncode == 3 and message in proc.stderr and "Traceback" not in proc.stderr


# -- ask ------------------------------------------------------------------------------------------


def ask_profile(isolated_dirs: Path, base_url: str, llm_extra: str = "") -> None:
    profile_file(
        isolated_dirs / "config",
        servers("confidential")
        + f'\n[llm]\nprovider = "openai"\nmodel = "m"\nbase_url = "{base_url}"\nmax_steps = 4\n{llm_extra}'
        + '\n[dlp]\nredact = ["email", "phone", "credit_card"]\n',
    )


@pytest.mark.usefixtures("isolated_dirs")
def test_ask_never_offers_a_server_above_the_models_clearance(isolated_dirs: Path) -> None:
    script = [turn("openai", calls=[("c1", "crm_customers", {})]), turn("openai", text="I cannot see customers.")]
    with FakeLLM("openai", script) as fake:
        ask_profile(isolated_dirs, fake.base_url)
        proc = llmc("ask", "who are our customers?", env={"OPENAI_API_KEY": "k"})
    assert proc.returncode == 0, proc.stderr
    offered = json.dumps(fake.requests[0].body.get("tools", []))
    assert "customers" not in offered and '"search"' in offered  # lib's alone: its tools under their own names
    sent = sent_results("openai", fake.requests[1].body)[0]
    assert sent["is_error"] and peer.EMAIL not in sent["text"]
    assert all(r.get("server") != "crm" or r.get("decision") != "allow" for r in audit_trail(isolated_dirs / "state"))


@pytest.mark.usefixtures("isolated_dirs")
def test_ask_with_clearance_gets_the_server_and_the_model_sees_redacted_results(isolated_dirs: Path) -> None:
    script = [turn("openai", calls=[("c1", "crm_customer", {})]), turn("openai", text="Maria Garcia, contact redacted.")]
    with FakeLLM("openai", script) as fake:
        ask_profile(isolated_dirs, fake.base_url, 'clearance = "confidential"')
        proc = llmc("ask", "who is our customer?", env={"OPENAI_API_KEY": "k"})
    assert proc.returncode == 0, proc.stderr
    assert "crm_customer" in json.dumps(fake.requests[0].body.get("tools", []))
    sent = sent_results("openai", fake.requests[1].body)[0]["text"]
    assert "[REDACTED:email]" in sent and "[REDACTED:credit_card]" in sent
    for request in fake.requests:
        assert peer.EMAIL not in json.dumps(request.body) and peer.CARD not in json.dumps(request.body)
    outcome = [r for r in audit_trail(isolated_dirs / "state") if r.get("event") == "outcome"][-1]
    assert {f["kind"] for f in outcome["findings"]} >= {"email", "credit_card"}


@pytest.mark.usefixtures("isolated_dirs")
def test_provider_clearance_overrides_for_that_provider(isolated_dirs: Path) -> None:
    script = [turn("openai", text="ok")]
    with FakeLLM("openai", script) as fake:
        ask_profile(isolated_dirs, fake.base_url, 'clearance = "confidential"\nprovider_clearance = { openai = "public" }')
        proc = llmc("ask", "hi", env={"OPENAI_API_KEY": "k"})
    assert proc.returncode == 0, proc.stderr
    offered = json.dumps(fake.requests[0].body.get("tools", []))
    assert "crm_" not in offered and "lib_" not in offered  # both servers are above "public"


# -- the gateway ----------------------------------------------------------------------------------


def test_gateway_host_without_clearance_sees_nothing_of_the_server(tmp_path: Path) -> None:
    profile = tmp_path / "gw.toml"
    profile.write_text(servers("confidential") + '\n[dlp]\nredact = ["email"]\n')

    async def work() -> None:
        async with host(profile, "legacy") as client:
            names = [t.name for t in (await client.list_tools()).tools]
            assert names and all(not n.startswith("crm.") for n in names)
            assert all(not r.uri.startswith("crm.") for r in (await client.list_resources()).resources)
            assert all(not p.name.startswith("crm.") for p in (await client.list_prompts()).prompts)
            # answered as a tool that does not exist: nothing tells the host the server is there
            with pytest.raises(MCPError, match=r"^Unknown tool: crm\.customers$"):
                await client.call_tool("crm.customers", {})

    run(work)
    records = [r for r in audit_trail_of(tmp_path) if r.get("server") == "crm"]
    assert records and all(r.get("rule") == "clearance" for r in records if r["event"] == "decision")


def audit_trail_of(tmp_path: Path) -> list[dict[str, Any]]:
    import os

    return audit_trail(Path(os.environ["LLMC_STATE_DIR"]))


@pytest.mark.e2e
def test_gateway_principals_get_their_own_clearance_and_redacted_results(tmp_path: Path) -> None:
    served = tmp_path / "gw.toml"
    served.write_text(
        servers("confidential", sandbox=True)
        + '\n[dlp]\nredact = ["email", "phone"]\n'
        + '\n[serve.principals.ops]\ntoken_env = "GW_OPS"\nclearance = "confidential"\n'
        + '\n[serve.principals.guest]\ntoken_env = "GW_GUEST"\n'
    )
    tokens = {"ops": "ops-token-0123456789abcdef", "guest": "guest-token-0123456789abcdef"}
    running = start(served, env={"GW_OPS": tokens["ops"], "GW_GUEST": tokens["guest"]})

    async def work() -> None:
        async with sdk_host(running.url, "legacy", tokens["ops"]) as ops:
            assert "crm.customers" in [t.name for t in (await ops.list_tools()).tools]
            text = (await ops.call_tool("crm.customers", {})).content[0].text
            assert "[REDACTED:email]" in text and peer.EMAIL not in text
            read = await ops.read_resource("crm.crm://customers")
            assert "[REDACTED:phone]" in read.contents[0].text
        async with sdk_host(running.url, "legacy", tokens["guest"]) as guest:
            assert all(not t.name.startswith("crm.") for t in (await guest.list_tools()).tools)
            with pytest.raises(MCPError, match=r"^Unknown tool: crm\.customers$"):
                await guest.call_tool("crm.customers", {})

    try:
        run(work)
    finally:
        stop(running)


@pytest.mark.usefixtures("isolated_dirs")
def test_a_result_addressing_the_model_is_flagged_in_the_audit(isolated_dirs: Path) -> None:
    script = [turn("openai", calls=[("c1", "crm_memo", {})]), turn("openai", text="The memo is about Q3.")]
    with FakeLLM("openai", script) as fake:
        ask_profile(isolated_dirs, fake.base_url, 'clearance = "confidential"')
        proc = llmc("ask", "what does the memo say?", env={"OPENAI_API_KEY": "k"})
    assert proc.returncode == 0, proc.stderr
    assert "Q3 numbers" in sent_results("openai", fake.requests[1].body)[0]["text"]  # handed on, as data
    outcome = [r for r in audit_trail(isolated_dirs / "state") if r.get("event") == "outcome"][-1]
    assert {"inspector": "instructions", "rule": "model_instruction"} in outcome["findings"]
    # a person's own call of the same tool is not a model reading it: nothing flagged
    assert llmc("call", "crm.memo").returncode == 0
    mine = [r for r in audit_trail(isolated_dirs / "state") if r.get("event") == "outcome"][-1]
    assert "findings" not in mine
