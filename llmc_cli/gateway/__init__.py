"""`llmc serve -p PROFILE`: the profile's toolbox as one MCP server, every call through services.

- toolbox.py    what the hosts share: the profile, its upstream servers (one catalog), the
                namespaced listings, routing back to the upstream, relayed upstream messages
- connection.py one host connection (a stdio host, an HTTP session, a stateless request): the
                dual-era server core of server/protocol.py with the gateway's methods
- http.py       Streamable HTTP: loopback by default, Origin/Host checks, sessions, SSE, health
- principals.py inbound bearer tokens per principal, stored as hashes in the profile
"""
