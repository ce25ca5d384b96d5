"""The session keeper (`llmc session start`): a background process that holds MCP servers between
llmc invocations.

daemon.py     the keeper process itself (`python -P -m llmc_cli.keeper.daemon`)
upstream.py   what it holds: the servers (Upstream) and the callers attached to them (Client)
lifecycle.py  start, find, inspect and stop keepers from a command
transport.py  the wire to a keeper: a Transport for sessions with the servers it holds, and attach()

Nothing here is imported at start-up; each command imports the module it needs.
"""
