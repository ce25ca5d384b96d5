"""The Model Context Protocol: messages, transports, sessions. Knows nothing of LLMs, policy or the CLI."""
