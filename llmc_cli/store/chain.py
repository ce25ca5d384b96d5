"""What every keeper of the audit chain shares (the JSON Lines file in audit.py, the database in
store/postgres.py)."""

from __future__ import annotations

GENESIS = "0" * 64  # the `prev` of a chain's first record, and the head of an empty chain
