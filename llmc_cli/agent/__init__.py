"""The `ask` agent: the loop (loop.py), saved conversations (conversations.py), the cut of results
the model sees (compaction.py) and a server's sampling answered by the profile's model
(sampling.py), the precedence of a run's settings (settings.py), a whole run for a front end (runs.py:
prepare, run). The names below are the package's interface."""

from llmc_cli.agent.compaction import compact
from llmc_cli.agent.conversations import (
    Conversation,
    conversation_path,
    conversations_dir,
    load_conversation,
    save_conversation,
    saved_conversations,
)
from llmc_cli.agent.loop import (
    STOP_END,
    STOP_LENGTH,
    STOP_MAX_STEPS,
    STOP_OTHER,
    STOP_TIMEOUT,
    CallTool,
    Limits,
    Progress,
    ReadOnly,
    RunRecord,
    ask,
    provider_tool_names,
)
from llmc_cli.agent.progress import progress_line
from llmc_cli.agent.sampling import sampler
from llmc_cli.agent.settings import AskOptions, AskSettings, resolve_settings

__all__ = [
    "compact",
    "Conversation",
    "conversation_path",
    "conversations_dir",
    "load_conversation",
    "save_conversation",
    "saved_conversations",
    "STOP_END",
    "STOP_LENGTH",
    "STOP_MAX_STEPS",
    "STOP_OTHER",
    "STOP_TIMEOUT",
    "CallTool",
    "Limits",
    "Progress",
    "ReadOnly",
    "RunRecord",
    "ask",
    "progress_line",
    "provider_tool_names",
    "sampler",
    "AskOptions",
    "AskSettings",
    "resolve_settings",
]
