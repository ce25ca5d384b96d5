"""ToolError: what a built-in server's handler raises when the tool ran and failed (mcp/server.py
makes it a result with isError). Its own module: the workspace jail raises it, and a command that
only launches a sandboxed server (services/sandbox.py imports the jail's Protected) need not load
the server framework (workers, queue, traceback)."""


class ToolError(Exception):
    """Raised by a handler: the tool ran and failed. Becomes a result with isError, so the model
    can read the message and correct itself (tools.mdx, "Tool Execution Errors")."""
