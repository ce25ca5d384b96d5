"""The typed token record in-process: what a TokenStore writes loads back equal, records written
by earlier llmc versions (nested dicts, empty tokens) load, and damaged ones are no record."""

from __future__ import annotations

import json

import pytest

from llmc_cli.mcp.auth import Client, TokenRecord, Tokens

FULL = TokenRecord(
    "https://mcp.example.com/mcp",
    "erp",
    "https://mcp.example.com/mcp",
    "https://as.example.com",
    "https://as.example.com/token",
    Client("c-1", "dynamic", "client_secret_basic", "http://127.0.0.1:4711/callback", "reg-secret"),
    Tokens("at", "rt", 1_900_000_000.0, "mcp:read offline_access"),
    1_800_000_000.0,
)

EARLIER = {
    "server_url": "https://mcp.example.com/mcp",
    "server": "erp",
    "resource": "https://mcp.example.com/mcp",
    "issuer": "https://as.example.com",
    "token_endpoint": "https://as.example.com/token",
    "client": {"client_id": "c-1", "source": "profile", "auth_method": "none"},
    "tokens": {},
    "updated_at": 5,
}


@pytest.mark.parametrize("record", [FULL, TokenRecord(**{**FULL.__dict__, "client": None, "tokens": Tokens()})])
def test_a_record_survives_the_store_format(record: TokenRecord) -> None:
    assert TokenRecord.from_json(json.loads(json.dumps(record.to_json()))) == record


def test_a_record_of_an_earlier_llmc_loads() -> None:
    record = TokenRecord.from_json(EARLIER)
    assert record is not None and record.client == Client("c-1", "profile")
    assert (record.tokens, record.updated_at) == (Tokens(), 5.0)


@pytest.mark.parametrize(
    "damaged",
    [
        None,
        [],
        "text",
        {},
        {**EARLIER, "issuer": None},
        {k: v for k, v in EARLIER.items() if k != "token_endpoint"},
    ],
)
def test_a_damaged_record_is_no_record(damaged: object) -> None:
    assert TokenRecord.from_json(damaged) is None


@pytest.mark.parametrize(
    "field, value",
    [
        ("client", "not a dict"),
        ("client", {"source": "dynamic"}),
        ("tokens", ["x"]),
        ("tokens", {"access_token": 7, "expires_at": "soon"}),
    ],
)
def test_damaged_parts_of_a_record_are_dropped_not_trusted(field: str, value: object) -> None:
    record = TokenRecord.from_json({**EARLIER, field: value})
    assert record is not None
    assert (record.client is None) if field == "client" else (record.tokens == Tokens())


def test_the_public_view_shows_no_token_or_secret() -> None:
    shown = json.dumps(FULL.public_view())
    assert not any(secret in shown for secret in ('"at"', '"rt"', "reg-secret"))
    assert FULL.public_view()["hasRefreshToken"] is True
