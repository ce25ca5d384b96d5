"""Two or three real examples for every command, as gh and kubectl show them: the end of each
command's --help (main.py puts them in its epilog when the command is loaded) and the EXAMPLES
section of its man page (scripts/gen_completions_and_man.py), from this one table. A test parses
every line against the Click tree and checks that every command has some."""

from __future__ import annotations

import click

MARK = "Examples:"

# command path (without "llmc") -> [(what it does, the command line)]
EXAMPLES: dict[str, list[tuple[str, str]]] = {
    "": [
        ("The tools of every server of the default profile, as a table", "llmc tools list --format table"),
        ("Call one tool; the typed command is the confirmation", "llmc call fs.read_text_file path=README.md"),
        (
            "Ask a model, which uses the tools under the profile's policy",
            "llmc -p ops ask 'Which pods restarted today?' --provider openai --model gpt-4.1-mini",
        ),
    ],
    "ask": [
        ("Ask with the profile's [llm] provider and model", "llmc ask 'Which log says the disk is full?'"),
        (
            "A local OpenAI-compatible server (no API key)",
            "llmc ask 'Summarise notes.md' --provider openai --model llama3 --base-url http://127.0.0.1:11434/v1",
        ),
        ("Go on with the last conversation, only the answer's text", "llmc ask --continue last --text 'And the day before?'"),
    ],
    "audit": [
        ("The last records", "llmc audit tail -n 20"),
        ("Check the hash chain", "llmc audit verify"),
    ],
    "audit head": [("The chain's head, to anchor elsewhere", "llmc audit head")],
    "audit tail": [
        ("The last 20 records as they arrive", "llmc audit tail -n 20 -f"),
        ("As JSON Lines for jq", "llmc audit tail -n 100 --format jsonl"),
    ],
    "audit verify": [("Check the whole hash chain (exit 1 when broken)", "llmc audit verify")],
    "auth": [
        ("Log in to a remote server's OAuth", "llmc auth login api"),
        ("Which servers hold tokens", "llmc auth status"),
    ],
    "auth login": [
        ("Log in with a browser", "llmc auth login api"),
        ("From an SSH session: print the URL, paste the redirect back", "llmc auth login api --no-browser"),
    ],
    "auth logout": [("Forget a server's tokens", "llmc auth logout api")],
    "auth status": [("Which servers hold tokens, and until when", "llmc auth status")],
    "cache": [("Drop every cached tool result", "llmc cache clear")],
    "cache clear": [
        ("Drop every cached tool result", "llmc cache clear"),
        ("Only one server's", "llmc cache clear --server fs"),
    ],
    "call": [
        ("key=value arguments, typed by the tool's inputSchema", "llmc call calc.add a=40 b=2"),
        ("Arguments as one JSON object", 'llmc call fs.write_file --json \'{"path": "a.txt", "content": "hi"}\''),
        ("Many calls from a JSON Lines file, one result line each", "llmc call --batch calls.jsonl"),
    ],
    "completion": [
        ("bash, in ~/.bashrc", 'eval "$(llmc completion bash)"'),
        ("fish", "llmc completion fish > ~/.config/fish/completions/llmc.fish"),
    ],
    "conversations": [
        ("The saved conversations", "llmc conversations list --format table"),
        ("The last one, whole", "llmc conversations show last"),
    ],
    "conversations list": [("The saved conversations as a table", "llmc conversations list --format table")],
    "conversations rm": [("Remove two conversations", "llmc conversations rm triage old-notes")],
    "conversations show": [("The last conversation, whole", "llmc conversations show last")],
    "ping": [
        ("Is every server of the profile up, and how fast?", "llmc ping"),
        ("One server", "llmc ping -s fs"),
    ],
    "policy": [
        ("What the policy decides for a call", "llmc policy check fs.write_file path=a.txt content=x"),
        ("Pre-approve one exact call for ask and the gateway", "llmc policy approve fs.write_file path=a.txt content=x"),
    ],
    "policy approve": [("Pre-approve one exact call", "llmc policy approve fs.write_file path=a.txt content=x")],
    "policy check": [
        ("What the policy decides for a call, and why", "llmc policy check fs.write_file path=a.txt content=x"),
        ("For a call a model would make", "llmc policy check --caller model fs.write_file path=a.txt"),
    ],
    "profiles": [
        ("Write the default profile to edit it", "llmc profiles init"),
        ("Every profile", "llmc profiles list"),
    ],
    "profiles init": [("Write the built-in default profile", "llmc profiles init")],
    "profiles list": [("Every profile, as a table", "llmc profiles list --format table")],
    "profiles show": [("A profile as llmc reads it", "llmc profiles show ops")],
    "prompts": [
        ("The prompts of every server", "llmc prompts list"),
        ("Get one with its arguments", "llmc prompts get sdk.review code='print(1)'"),
    ],
    "prompts get": [("Get one prompt with its arguments", "llmc prompts get sdk.review code='print(1)'")],
    "prompts list": [("The prompts of one server", "llmc prompts list -s sdk")],
    "resources": [
        ("The resources of every server", "llmc resources list"),
        ("Read one", "llmc resources read file:///srv/data/notes.md"),
    ],
    "resources list": [("The resources of one server, as a table", "llmc resources list -s fs --format table")],
    "resources read": [("Read one resource", "llmc resources read file:///srv/data/notes.md")],
    "resources templates": [("The resource templates of every server", "llmc resources templates")],
    "serve": [
        ("The profile's tools as one MCP server on stdio, for any MCP host", "llmc serve -p ops"),
        ("Over HTTP, on loopback", "llmc serve -p ops --http 127.0.0.1:8765"),
    ],
    "serve token": [
        ("A bearer token for one host of the HTTP gateway", "llmc serve token create laptop"),
        ("The tokens there are", "llmc serve token list"),
    ],
    "serve token create": [("A token for one host", "llmc serve token create laptop")],
    "serve token list": [("The tokens there are", "llmc serve token list")],
    "serve token revoke": [("Revoke a token", "llmc serve token revoke laptop")],
    "serve workspace": [
        ("The built-in workspace server, read-only, on stdio", "llmc serve workspace --root . --read-only"),
    ],
    "servers": [
        ("Add a stdio server", "llmc servers add fs -- npx -y @modelcontextprotocol/server-filesystem /srv/data"),
        ("The servers of the profile", "llmc servers list"),
    ],
    "servers add": [
        (
            "A stdio server (it sees /srv/data in its sandbox)",
            "llmc servers add fs -- npx -y @modelcontextprotocol/server-filesystem /srv/data",
        ),
        (
            "A remote server; the token expands from the environment when used",
            "llmc servers add api --url https://mcp.example.com/mcp --header 'Authorization: Bearer ${API_TOKEN}'",
        ),
    ],
    "servers disable": [("Keep a server but use it only when named with -s", "llmc servers disable fs")],
    "servers enable": [("Use a disabled server again", "llmc servers enable fs")],
    "servers import": [
        ("See what would be imported from Claude Desktop's config", "llmc servers import claude_desktop_config.json --dry-run"),
        ("Import it", "llmc servers import claude_desktop_config.json"),
    ],
    "servers install": [
        ("See the entry Claude Desktop would get", "llmc servers install --client claude-desktop -p ops --dry-run"),
        ("Put the gateway into Cursor's config", "llmc servers install --client cursor -p ops"),
    ],
    "servers list": [("The servers of the profile, as a table", "llmc servers list --format table")],
    "servers remove": [("Remove servers from the profile", "llmc servers remove fs api")],
    "servers show": [("One server, and how it runs here", "llmc servers show fs")],
    "session": [
        ("Keep the profile's servers running between commands", "llmc session start ops"),
        ("The sessions there are", "llmc session list"),
    ],
    "session forget": [("Forget a remote server's remembered session", "llmc session forget -s api")],
    "session list": [("The sessions there are", "llmc session list")],
    "session start": [
        ("Keep the profile's servers running between commands", "llmc session start ops"),
        ("Only some servers", "llmc session start dev -s fs"),
    ],
    "session stop": [("Stop a session and its servers", "llmc session stop ops")],
    "state": [("Bring the profile's [state] database up to date", "llmc -p ops state migrate")],
    "state migrate": [
        ("Bring the [state] url database up to date (safe to run again)", "llmc -p ops state migrate"),
        ("The default profile's", "llmc state migrate"),
    ],
    "tools": [
        ("Every tool, as a table", "llmc tools list --format table"),
        ("One tool: arguments, schemas, the policy's decision", "llmc tools show fs.write_file"),
    ],
    "tools diff": [("What changed since the lock", "llmc tools diff --lock llmc.lock")],
    "tools export": [
        ("Write the manifest for Anthropic's API", "llmc tools export --format anthropic -o tools.json"),
        ("OpenAI's, to stdout", "llmc tools export --format openai -o -"),
    ],
    "tools lint": [("What each provider would change or refuse", "llmc tools lint --format table")],
    "tools list": [
        ("A table for people", "llmc tools list --format table"),
        ("Only the tools whose names match a glob", "llmc tools list --match 'read_*'"),
        ("Translated for a provider's API", "llmc tools list -s fs --format openai"),
    ],
    "tools lock": [("Pin the tools, then check for drift in CI (exit 10)", "llmc tools lock -o llmc.lock")],
    "tools scan": [
        ("Look for attacks in what the profile's servers tell the model", "llmc tools scan --format table"),
        ("One server, as JSON (exit 1 on a high finding)", "llmc tools scan -s fs --format json"),
    ],
    "tools search": [("The tools that match words", "llmc tools search 'read a file'")],
    "tools show": [
        ("One tool: arguments, schemas, annotations, the policy's decision", "llmc tools show fs.write_file"),
        ("The same as JSON", "llmc tools show fs.write_file --format json"),
    ],
}


def block(path: str) -> str:
    """The examples of a command (path without "llmc") as the end of its --help; "" for none.
    `\\b` keeps Click from rewrapping the lines."""
    examples = EXAMPLES.get(path)
    if not examples:
        return ""
    return f"{MARK}\n\n" + "\n\n".join(f"\b\n  # {text}\n  {line}" for text, line in examples) + "\n"


def attach_examples(command: object, path: str) -> None:
    """Put the examples at the end of a command's --help (and its subcommands'), once."""
    if not isinstance(command, click.Command) or getattr(command, "_llmc_examples", False):
        return
    command._llmc_examples = True  # type: ignore[attr-defined]
    examples = block(path)
    if examples and MARK not in (command.epilog or ""):
        command.epilog = f"{command.epilog.rstrip()}\n\n{examples}" if command.epilog else examples
    for name, sub in getattr(command, "commands", {}).items():
        attach_examples(sub, f"{path} {name}".strip())
