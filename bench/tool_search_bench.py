"""Tool search quality and speed: the labelled queries of bench/tool_search_queries.json over the
tools of four reference servers (server-everything, server-filesystem, Desktop Commander, llmc's
workspace server, listed live) plus a generated 500-tool SaaS server; the share of queries whose
expected tool is in the top 1 and top 3, and the time per query.

    .venv/bin/python bench/tool_search_bench.py [--misses]

Needs tests/node and tests/node-dc installed (scripts/test.sh). The generated server is
deterministic (a fixed seed): 20 SaaS products, their resources and verbs, descriptions from a
few templates and arguments with descriptions, as a hub of many SaaS servers would list them.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmc_cli.model import ServerSpec, Tool  # noqa: E402
from llmc_cli.services.search import ToolIndex  # noqa: E402

GENERIC = ["create", "get", "list", "update", "delete"]
SAAS = {  # product -> (resources, extra verbs beside the generic ones)
    "github": (["issue", "pull_request", "label", "repository", "branch", "release"], ["close", "merge", "search"]),
    "slack": (["message", "channel", "user", "reaction", "file"], ["send", "invite", "archive", "search"]),
    "jira": (["issue", "comment", "project", "sprint", "board"], ["assign", "transition", "search"]),
    "google_calendar": (["event", "calendar", "attendee", "reminder"], ["search"]),
    "stripe": (["payment", "invoice", "customer", "subscription", "refund"], ["refund", "cancel", "search"]),
    "salesforce": (["contact", "lead", "opportunity", "account", "task"], ["search", "convert"]),
    "hubspot": (["deal", "contact", "company", "ticket", "note"], ["search", "associate"]),
    "gmail": (["message", "draft", "label", "thread"], ["send", "search", "archive"]),
    "notion": (["page", "database", "block", "comment"], ["search", "archive"]),
    "linear": (["issue", "project", "cycle", "team", "comment"], ["archive", "assign", "search"]),
    "zendesk": (["ticket", "user", "attachment", "macro", "organization"], ["search", "merge"]),
    "asana": (["task", "project", "section", "tag"], ["complete", "search"]),
    "trello": (["card", "board", "list", "checklist"], ["move", "archive"]),
    "dropbox": (["file", "folder", "shared_link"], ["upload", "download", "move", "search"]),
    "twilio": (["message", "call", "phone_number", "recording"], ["send"]),
    "shopify": (["product", "order", "customer", "collection", "inventory_item"], ["fulfill", "cancel", "refund"]),
    "intercom": (["conversation", "contact", "article", "tag"], ["reply", "close", "search"]),
    "confluence": (["page", "space", "attachment", "comment"], ["search", "move"]),
    "airtable": (["record", "table", "base", "field"], ["search"]),
    "zoom": (["meeting", "webinar", "recording", "user"], ["start", "end"]),
}
TEMPLATES = ["{Verb} a {res} in {Svc}.", "{Verb}s {svc} {res}s for the authenticated account.",
             "Use this tool to {verb} a {Svc} {res}.", "{Svc}: {verb} {res}. Returns the {res} as JSON.",
             "{Verb} one or more {res}s ({Svc} API)."]


def saas_server(count: int = 500, seed: int = 30) -> list[Tool]:
    rng = random.Random(seed)
    tools = []
    for svc, (resources, extra) in SAAS.items():
        label = svc.replace("_", " ").title()
        for res in resources:
            words = res.replace("_", " ")
            for verb in GENERIC + extra:
                props = {f"{res}_id": {"type": "string", "description": f"The {words}'s ID in {label}."}}
                if verb in ("create", "update"):
                    props |= {"title": {"type": "string", "description": f"Title of the {words}."},
                              "body": {"type": "string", "description": "Text content."}}
                if verb in ("list", "search"):
                    props = {"query": {"type": "string", "description": f"Filter {words}s."},
                             "limit": {"type": "integer", "description": "Page size."}}
                text = rng.choice(TEMPLATES).format(Verb=verb.capitalize(), verb=verb, res=words, Svc=label, svc=label)
                name = f"{svc}_{verb}_{res}" + ("s" if verb in ("list", "search") else "")
                tools.append(Tool("saas", name, {"type": "object", "properties": props},
                                  description=text))
    # Exactly `count`: keep every tool a query expects, then fill with the others in a fixed shuffle.
    expected = {q.split(".", 1)[1] for item in queries() for q in item["expect"] if q.startswith("saas.")}
    keep = [t for t in tools if t.name in expected]
    rest = [t for t in tools if t.name not in expected]
    rng.shuffle(rest)
    missing = expected - {t.name for t in keep}
    if missing:
        raise SystemExit(f"the generated server lacks expected tools: {sorted(missing)}")
    return keep + rest[:count - len(keep)]


def queries() -> list[dict]:
    return json.loads((ROOT / "bench" / "tool_search_queries.json").read_text())["queries"]


def reference_tools() -> list[Tool]:
    from llmc_cli.catalog import Catalog
    from llmc_cli.services.catalogs import builtin_servers

    home = Path(tempfile.mkdtemp(prefix="llmc-bench-"))
    (home / ".claude-server-commander").mkdir()
    (home / ".claude-server-commander" / "config.json").write_text(json.dumps({
        "telemetryEnabled": False, "pendingWelcomeOnboarding": False, "welcomeOnboardingEligible": False,
        "allowedDirectories": [], "blockedCommands": []}))
    bins = ROOT / "tests" / "node" / "node_modules" / ".bin"
    node = str(bins / "node") if (bins / "node").exists() else shutil.which("node") or "node"
    dc = ROOT / "tests" / "node-dc" / "node_modules" / "@wonderwhy-er" / "desktop-commander" / "dist" / "index.js"
    specs = [ServerSpec("everything", command=(str(bins / "mcp-server-everything"),)),
             ServerSpec("fs", command=(str(bins / "mcp-server-filesystem"), str(home))),
             ServerSpec("dc", command=(node, str(dc)), env={"HOME": str(home), "DESKTOP_COMMANDER_DISABLE_TELEMETRY": "1",
                                                            "DC_FLAG_URL": "http://127.0.0.1:9/flags.json"}),
             ServerSpec("ws", builtin="workspace", options={"roots": [str(home)]})]
    try:
        with Catalog(specs, builtins=builtin_servers()) as catalog:
            tools, failures = catalog.list_tools()
    finally:
        shutil.rmtree(home, ignore_errors=True)
    if failures:
        raise SystemExit(f"servers failed: {[f.to_json() for f in failures]}")
    return tools


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--misses", action="store_true", help="Print each query whose tool is not in the top 3.")
    args = parser.parse_args()
    reference = reference_tools()
    tools = reference + saas_server()
    started = time.perf_counter()
    index = ToolIndex(tools)
    index_ms = (time.perf_counter() - started) * 1000
    top1 = top3 = 0
    times = []
    labelled = queries()
    for item in labelled:
        t0 = time.perf_counter()
        found = [m.tool.qualified_name for m in index.search(item["query"], 3)]
        times.append((time.perf_counter() - t0) * 1000)
        top1 += bool(found) and found[0] in item["expect"]
        hit = any(name in item["expect"] for name in found)
        top3 += hit
        if args.misses and not hit:
            print(f"miss: {item['query']!r}: got {found}, expected one of {item['expect']}")
    n = len(labelled)
    print(f"tools: {len(tools)} ({len(reference)} of the four reference servers + 500 generated); queries: {n}")
    print(f"top-1: {top1}/{n} ({100 * top1 / n:.0f}%); top-3: {top3}/{n} ({100 * top3 / n:.0f}%)")
    print(f"index: {index_ms:.1f} ms; per query: median {statistics.median(times):.2f} ms, max {max(times):.2f} ms")


if __name__ == "__main__":
    main()
