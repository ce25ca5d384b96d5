"""Questions on a real terminal (a pty, tests/terminal.py): a confirmation's answer belongs to the
call shown with it, Ctrl-C at any question exits 130 cleanly, and nothing a server or a model
wrote acts on the terminal. The installed llmc, real MCP servers, a wire-level fake model."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.llm import FakeLLM
from tests.fakes.scripts import turn
from tests.helpers import audit_trail, node_tool, profile_file, sdk_server, signal_another_thread
from tests.peers.hostile_text import PAYLOAD, RAW_MARKERS
from tests.terminal import Terminal

pytestmark = pytest.mark.e2e  # llmc on a real terminal (a pty)

KEY = {"OPENAI_API_KEY": "test-key"}


def write_profile(root: Path, base_url: str = "http://127.0.0.1:9", policy: str = "") -> None:
    profile_file(
        root / "config",
        f"""
[servers.h]
command = "{sys.executable}"
args = ["{sdk_server("hostile_text.py")[1]}"]

[servers.every]
command = "{node_tool("mcp-server-everything")}"

[llm]
provider = "openai"
model = "model-fake"
base_url = "{base_url}"

[policy]
{policy}
""",
    )


def audit(root: Path) -> list[dict[str, Any]]:
    return audit_trail(root / "state")


@pytest.mark.parametrize("approve", ["first shown", "second shown"])
def test_each_answer_approves_exactly_the_call_shown_with_it(isolated_dirs, approve):
    """Two read-only calls run in parallel threads and both need a confirmation: one question is
    visible at a time, and the call that runs is the one whose arguments were on screen with the
    'y' (the bug: both questions printed, and the 'y' under the second approved the first)."""
    script = [
        turn("openai", calls=[("c1", "echo", {"message": "/etc/hostname"}), ("c2", "echo", {"message": "/etc/shadow"})]),
        turn("openai", text="done"),
    ]
    with FakeLLM("openai", script) as fake:
        write_profile(isolated_dirs, fake.base_url, 'confirm = ["h.echo"]')
        with Terminal("ask", "go", "-s", "h", env=KEY) as term:
            shown = []
            for n in range(2):
                question = term.expect("Run it?")
                assert question.count("needs your confirmation") == 1, question
                (message,) = [m for m in ("/etc/hostname", "/etc/shadow") if f'"{m}"' in question]
                shown.append(message)
                term.type("y" if approve == ("first shown", "second shown")[n] else "n")
            code = term.wait()
    assert code == 0, term.screen
    approved = shown[0] if approve == "first shown" else shown[1]
    outcomes = {s["arguments"]["message"]: s["outcome"] for s in json.loads(term.stdout)["steps"]}
    assert sorted(shown) == ["/etc/hostname", "/etc/shadow"]
    assert outcomes == {m: "ok" if m == approved else "denied" for m in shown}
    decisions = {r["arguments"]["message"]: r["decision"] for r in audit(isolated_dirs) if r["event"] == "decision"}
    assert decisions == {m: "allow" if m == approved else "deny" for m in shown}


# (what is asked, where the question runs, command, model turns, (wait for, answer) before the
# question that gets the Ctrl-C, that question)
ASK_ECHO = [turn("openai", calls=[("c1", "echo", {"message": "a"}), ("c2", "echo", {"message": "b"})])]
ASK_ELICIT = [turn("openai", calls=[("c1", "ask", {})])]
INTERRUPTED_QUESTIONS = [
    ("confirmation, main thread", ["call", "h.echo", "message=hi"], None, [], "Run it?"),
    ("confirmation, a parallel tool thread of ask", ["ask", "go", "-s", "h"], ASK_ECHO, [], "Run it?"),
    ("second confirmation, ask", ["ask", "go", "-s", "h"], ASK_ECHO, [("Run it?", "n")], "Run it?"),
    ("elicitation, 2026-07-28 (input_required, main thread)", ["call", "h.ask"], None, [], "Answer?"),
    ("elicitation field, 2026-07-28", ["call", "h.ask"], None, [("Answer?", "y")], "(required"),
    (
        "elicitation, initialize era (a request served on another thread)",
        ["call", "every.trigger-elicitation-request", "--yes"],
        None,
        [],
        "Answer?",
    ),
    (
        "elicitation field, initialize era",
        ["call", "every.trigger-elicitation-request", "--yes"],
        None,
        [("Answer?", "y")],
        "Your full, legal name",
    ),
    ("elicitation in a tool thread of ask", ["ask", "go", "-s", "h"], ASK_ELICIT, [], "Answer?"),
]


@pytest.mark.parametrize(
    "what,argv,script,before,question", INTERRUPTED_QUESTIONS, ids=[case[0] for case in INTERRUPTED_QUESTIONS]
)
def test_ctrl_c_at_any_question_exits_130_cleanly(isolated_dirs, what, argv, script, before, question):
    """The bug: a question read in another thread held stdin's buffer lock, and Ctrl-C ended in
    'Fatal Python error: _enter_buffered_busy' (exit 134) and ate the shell's next line."""
    with FakeLLM("openai", list(script or [])) as fake:
        write_profile(isolated_dirs, fake.base_url, 'confirm = ["h.echo"]')
        with Terminal(*argv, env=KEY) as term:
            for wait_for, answer in before:
                term.expect(wait_for)
                term.type(answer)
            term.expect(question)
            term.interrupt()
            code = term.wait()
            assert code == 130, term.screen
            assert "interrupted" in term.screen
            assert "Fatal Python error" not in term.screen and "Traceback" not in term.screen, term.screen
            assert term.line_reaches_the_shell()


MAIN_THREAD_QUESTIONS = [
    ("confirmation", ["call", "h.echo", "message=hi"], "Run it?"),
    ("elicitation", ["call", "h.ask"], "Answer?"),
]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name)
@pytest.mark.parametrize("what,argv,question", MAIN_THREAD_QUESTIONS, ids=[q[0] for q in MAIN_THREAD_QUESTIONS])
def test_a_signal_taken_by_another_thread_ends_a_question_on_the_main_thread(isolated_dirs, what, argv, question, sig):
    """The kernel may hand a process's signal to any of its threads (here: one of the server
    connection's); the main thread waits in read(2) for the person's answer and must not sleep
    through it until something is typed."""
    write_profile(isolated_dirs, policy='confirm = ["h.echo"]')
    with Terminal(*argv, env=KEY) as term:
        term.expect(question)
        signal_another_thread(term.proc.pid, sig)
        code = term.wait()
    assert code == (130 if sig == signal.SIGINT else 143), term.screen  # DESIGN: SIGTERM and SIGHUP are 143
    assert "Traceback" not in term.screen, term.screen


def test_an_elicitation_shows_descriptions_and_takes_empty_optional_fields(isolated_dirs):
    """Each field with its description and whether it is required; an optional field left empty
    is left out; an answer of the wrong type is asked again."""
    write_profile(isolated_dirs)
    with Terminal("call", "h.ask", env=KEY) as term:
        term.expect("Answer?")
        term.type("y")
        assert "Who you are" in term.expect("(required")
        term.type("Ada")
        assert "Years, if you like" in term.expect("(optional")
        term.type("many")
        term.expect("expected an integer")
        term.expect("(optional")
        term.type("")
        assert "one of: red, blue" in term.expect('Enter = default "blue")')  # Enter takes it: said so
        term.type("green")
        term.expect("answer one of: red, blue")
        term.expect('default "blue")')  # asked again: typeahead before the question is dropped
        term.type("red")
        code = term.wait()
    assert code == 0, term.screen
    answer = json.loads(json.loads(term.stdout)["content"][0]["text"])
    assert answer == {"action": "accept", "data": {"name": "Ada", "age": None, "colour": "red"}}


# How each kind of text a server or a model writes reaches the terminal: (name, command, model
# turns, (wait for, answer) pairs). The payload holds OSC 52, cursor movement, a C1 CSI, a bidi
# override and a bell; it must show only as visible escapes.
ESCAPES = [
    ("tool description in a table", ["tools", "list", "-s", "h", "--format", "table"], None, []),
    ("error result", ["call", "h.fail"], None, []),
    ("progress message", ["call", "h.progress"], None, []),
    ("log notification (-v)", ["-v", "call", "h.log"], None, []),
    ("server stderr (-v)", ["-v", "call", "h.stderr"], None, []),
    ("elicitation message and field description", ["call", "h.ask"], None, [("Answer?", "n")]),
    (
        "confirmation prompt with a model's arguments",
        ["ask", "go", "-s", "h"],
        [turn("openai", calls=[("c1", "echo", {"message": PAYLOAD})]), turn("openai", text="ok")],
        [("Run it?", "n")],
    ),
    ("an answer streamed with --text", ["ask", "go", "-s", "h", "--text"], [turn("openai", text=PAYLOAD)], []),
    ("an answer streamed beside the JSON", ["ask", "go", "-s", "h"], [turn("openai", text=PAYLOAD)], []),
    ("a manifest for a text-protocol model", ["tools", "list", "-s", "h", "--format", "text"], None, []),
]


@pytest.mark.parametrize("what,argv,script,answers", ESCAPES, ids=[case[0] for case in ESCAPES])
def test_server_and_model_text_cannot_act_on_the_terminal(isolated_dirs, what, argv, script, answers):
    with FakeLLM("openai", list(script or [])) as fake:
        write_profile(isolated_dirs, fake.base_url, 'confirm = ["h.echo"]')
        with Terminal(*argv, env=KEY, stdout_on_terminal=True) as term:
            for wait_for, answer in answers:
                term.expect(wait_for)
                term.type(answer)
            term.wait()
    # the text was shown, made visible (in JSON, as JSON escapes it)
    assert "\\x1b]52;c;cHduZWQ=" in term.screen or "\\u001b]52;c;cHduZWQ=" in term.screen, term.screen
    raw = [marker for marker in RAW_MARKERS if marker in term.screen]
    assert not raw, f"{what}: {raw} reached the terminal raw"


# server-everything's form, field by field: (title, what is typed, what llmc says before asking again)
EVERYTHING_FORM = [
    ("String", "Ada", None),  # required
    ("Boolean", "", None),  # optional, no default: left out
    ("String with default", "", None),  # the default
    ("String with email format", "", None),
    ("String with uri format", "", None),
    ("String with date format", "", None),
    ("Integer", "500", "at most 100"),
    ("Integer", "7", None),
    ("Number in range 1-1000", "", None),
    ("Untitled Single Select Enum", "Rachel", None),
    ("Untitled Multiple Select Enum", "Guitar, Piano, Violin, Drums", "give at most 3"),
    ("Untitled Multiple Select Enum", "Piano, Drums", None),
    ("Titled Single Select Enum", "hero-3", None),
    ("Titled Multiple Select Enum", "", None),
    ("Legacy Titled Single Select Enum", "pet-2", None),
]


def test_a_whole_form_of_the_reference_server(isolated_dirs):
    write_profile(isolated_dirs)
    with Terminal("call", "every.trigger-elicitation-request", "--yes", env=KEY) as term:
        term.expect("Answer?")
        term.type("y")
        for title, typed, complaint in EVERYTHING_FORM:
            term.expect(f"{title} (")
            term.type(typed)
            if complaint:
                term.expect(complaint)
        code = term.wait()
    assert code == 0, term.screen
    assert "Your full, legal name" in term.screen and "(required" in term.screen
    assert "one of: hero-1 (Superman), hero-2 (Green Lantern), hero-3 (Wonder Woman)" in term.screen
    text = "\n".join(c.get("text", "") for c in json.loads(term.stdout)["content"])
    assert "- Name: Ada" in text and "- Favorite Integer: 7" in text and "- Favorite Number: 3.14" in text
    assert "Agreed to terms" not in text  # the optional boolean left empty was left out
