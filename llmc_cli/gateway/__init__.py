"""`llmc serve -p PROFILE`: the profile's toolbox as one MCP server, every call through services.

- toolbox.py    what the hosts share: the profile, its upstream servers (one catalog), the
                namespaced listings, routing back to the upstream
- request_state.py  the sealed 2026-07-28 requestState of a host's call (confirmation, answers)
- relay.py      upstream messages about a host's call (progress, logs, elicitation, sampling,
                roots) to that host only, on mcp/router.py
- connection.py one host connection (a stdio host, an HTTP session, a stateless request): the
                dual-era server core of mcp/server.py with the gateway's methods
- hosts.py      what HTTP requests share: Host/Origin/principal checks, toolboxes per profile,
                initialize-era host sessions (each with its own upstreams where they keep state)
- http.py       Streamable HTTP: loopback by default, what is admitted, which connection answers
- replies.py    request heads; how replies reach an HTTP host: JSON, a call's (resumable) SSE stream, GET streams
- principals.py inbound bearer tokens per principal, stored as hashes in the profile
"""
