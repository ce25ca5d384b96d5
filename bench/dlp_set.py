"""The labelled set the DLP detectors are chosen and checked by (bench/dlp_bench.py,
tests/guard/test_dlp_set.py): real-looking records carrying personal data and credentials, and
clean technical text that must pass untouched, generated with a fixed seed.

Each sample is {"text": ..., "labels": [[kind, value], ...]}: every value is a substring of the
text, the kind one of the detector names (email, phone, credit_card, iban, secret, private_key).
A clean sample has no labels: anything a detector finds in it is a false positive.

    .venv/bin/python bench/dlp_set.py --seed 36 --count 400 > /tmp/dlp_set.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
import string
import sys
from typing import Any

Sample = dict[str, Any]

FIRST = ["Maria", "James", "Aiko", "Lena", "Omar", "Priya", "Lucas", "Chloé", "Søren", "Fatima", "Wei", "Diego"]
LAST = ["Garcia", "Smith", "Tanaka", "Müller", "Haddad", "Patel", "Silva", "Dubois", "Nielsen", "Khan", "Chen", "Rossi"]
DOMAINS = ["example.com", "acme-corp.io", "mail.example.org", "gmail.com", "outlook.de", "company.co.uk", "startup.dev"]
CITIES = ["Berlin", "London", "Austin", "Lyon", "Osaka", "Toronto", "Madrid"]
US_AREAS = ["212", "415", "312", "617", "206", "512", "303", "404", "213", "646"]


def _luhn_digit(partial: str) -> str:
    total = 0
    for i, ch in enumerate(reversed(partial)):
        d = int(ch)
        if i % 2 == 0:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return str((10 - total % 10) % 10)


def card(rng: random.Random) -> str:
    prefix, length = rng.choice([("4", 16), ("51", 16), ("55", 16), ("2221", 16), ("34", 15), ("37", 15), ("6011", 16)])
    body = prefix + "".join(rng.choice(string.digits) for _ in range(length - len(prefix) - 1))
    number = body + _luhn_digit(body)
    style = rng.choice(["space", "dash", "plain"])
    if style == "plain":
        return number
    sep = " " if style == "space" else "-"
    if length == 15:
        return sep.join([number[:4], number[4:10], number[10:]])
    return sep.join(number[i : i + 4] for i in range(0, 16, 4))


_IBAN_SHAPES = {"DE": "8n10n", "GB": "4a6n8n", "FR": "5n5n11c2n", "NL": "4a10n", "ES": "4n4n2n10n", "IT": "1a5n5n12c"}


def iban(rng: random.Random) -> str:
    country = rng.choice(list(_IBAN_SHAPES))
    bban = ""
    shape = _IBAN_SHAPES[country]
    i = 0
    while i < len(shape):
        j = i
        while shape[j].isdigit():
            j += 1
        n, kind = int(shape[i:j]), shape[j]
        pool = string.digits if kind == "n" else string.ascii_uppercase if kind == "a" else string.digits + string.ascii_uppercase
        bban += "".join(rng.choice(pool) for _ in range(n))
        i = j + 1
    rearranged = bban + country + "00"
    numeric = "".join(str(int(c, 36)) for c in rearranged)
    check = 98 - int(numeric) % 97
    compact = f"{country}{check:02d}{bban}"
    if rng.random() < 0.5:
        return " ".join(compact[k : k + 4] for k in range(0, len(compact), 4))
    return compact


def phone(rng: random.Random) -> str:
    kind = rng.choice(["us", "us", "uk", "de", "fr", "intl_us"])
    if kind in ("us", "intl_us"):
        area = rng.choice(US_AREAS)
        exchange = str(rng.randint(2, 9)) + "".join(rng.choice(string.digits) for _ in range(2))
        line = "".join(rng.choice(string.digits) for _ in range(4))
        if kind == "intl_us":
            return f"+1 {area} {exchange} {line}"
        return rng.choice([f"({area}) {exchange}-{line}", f"{area}-{exchange}-{line}", f"{area}.{exchange}.{line}"])
    if kind == "uk":
        return f"+44 20 7946 0{rng.randint(100, 999)}"
    if kind == "de":
        return f"+49 30 {rng.randint(2000000, 8999999)}"
    return f"+33 1 {rng.randint(40, 79)} {rng.randint(10, 99)} {rng.randint(10, 99)} {rng.randint(10, 99)}"


def email(rng: random.Random) -> str:
    first, last = rng.choice(FIRST), rng.choice(LAST)
    user = rng.choice([f"{first}.{last}", f"{first[0]}{last}", f"{first}_{rng.randint(1, 99)}", f"{last}+orders"])
    ascii_user = user.lower().replace("é", "e").replace("ø", "o").replace("ü", "u")
    return f"{ascii_user}@{rng.choice(DOMAINS)}"


def _chars(rng: random.Random, n: int, pool: str = string.ascii_letters + string.digits) -> str:
    return "".join(rng.choice(pool) for _ in range(n))


def secret(rng: random.Random) -> tuple[str, str]:
    """(the text it stands in, the secret value)."""
    kind = rng.choice(["aws", "aws_secret", "github", "github_pat", "slack", "openai", "anthropic", "google", "stripe", "keyed"])
    if kind == "aws":
        value = "AKIA" + _chars(rng, 16, string.ascii_uppercase + "234567")
        return f"aws_access_key_id = {value}", value
    if kind == "aws_secret":
        value = _chars(rng, 40, string.ascii_letters + string.digits + "+/")
        return f"aws_secret_access_key = {value}", value
    if kind == "github":
        value = "ghp_" + _chars(rng, 36)
        return f"token: {value}", value
    if kind == "github_pat":
        value = "github_pat_" + _chars(rng, 22) + "_" + _chars(rng, 59)
        return f"GITHUB_TOKEN={value}", value
    if kind == "slack":
        value = f"xoxb-{rng.randint(10**10, 10**11)}-{rng.randint(10**10, 10**11)}-{_chars(rng, 24)}"
        return f"slack bot token {value}", value
    if kind == "openai":
        value = "sk-proj-" + _chars(rng, 48, string.ascii_letters + string.digits + "_-") + "T3BlbkFJ" + _chars(rng, 20)
        return f'"OPENAI_API_KEY": "{value}"', value
    if kind == "anthropic":
        value = "sk-ant-api03-" + _chars(rng, 93, string.ascii_letters + string.digits + "_-") + "AA"
        return f"ANTHROPIC_API_KEY={value}", value
    if kind == "google":
        value = "AIza" + _chars(rng, 35, string.ascii_letters + string.digits + "_-")
        return f"https://maps.googleapis.com/maps/api/geocode/json?address=x&key={value}", value
    if kind == "stripe":
        value = rng.choice(["sk_live_", "rk_live_", "sk_test_"]) + _chars(rng, 24)
        return f"stripe.api_key = '{value}'", value
    value = _chars(rng, rng.randint(20, 32), string.ascii_letters + string.digits + "!@#%^&*")
    key = rng.choice(["password", "client_secret", "db_password", "api_token", "secret"])
    return rng.choice([f'"{key}": "{value}"', f"{key}={value}", f"{key}: {value}"]), value


def private_key(rng: random.Random) -> str:
    label = rng.choice(["RSA PRIVATE KEY", "PRIVATE KEY", "OPENSSH PRIVATE KEY", "EC PRIVATE KEY"])
    lines = [_chars(rng, 64, string.ascii_letters + string.digits + "+/") for _ in range(rng.randint(3, 8))]
    return f"-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----"


def sensitive(rng: random.Random) -> Sample:
    """A record carrying one to four findings, in one of a few shapes servers return."""
    labels: list[list[str]] = []
    parts: list[str] = []
    name = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
    shape = rng.choice(["crm", "json", "log", "config", "payment", "ticket"])
    if shape in ("crm", "json", "ticket"):
        e, p = email(rng), phone(rng)
        labels += [["email", e], ["phone", p]]
        if shape == "crm":
            parts.append(
                f"Customer: {name}\nEmail: {e}\nPhone: {p}\nCity: {rng.choice(CITIES)}\nSince: 2021-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}"
            )
        elif shape == "json":
            parts.append(
                json.dumps(
                    {"id": rng.randint(1000, 99999), "name": name, "email": e, "phone": p, "created": "2024-11-02T09:14:33Z"},
                    ensure_ascii=False,
                )
            )
        else:
            parts.append(f"Ticket SUP-{rng.randint(1000, 9999)} opened by {name} <{e}>. Call back on {p} before 17:00 CET.")
    elif shape == "payment":
        c, i = card(rng), iban(rng)
        labels += [["credit_card", c], ["iban", i]]
        parts.append(
            f"Refund for order ORD-2024-{rng.randint(100000, 999999)}: card {c} (exp 0{rng.randint(1, 9)}/27), payout to IBAN {i}, amount EUR {rng.randint(10, 999)}.{rng.randint(10, 99)}"
        )
    elif shape == "config":
        text, value = secret(rng)
        labels.append(["secret", value])
        parts.append(
            f"# deployed {rng.randint(1, 28)} Nov 2024 by ci@{rng.choice(['build01', 'runner-7'])}\nregion = eu-west-1\n{text}\nport = 5432"
        )
    else:
        text, value = secret(rng)
        labels.append(["secret", value])
        parts.append(f"2024-11-0{rng.randint(1, 9)}T12:0{rng.randint(0, 9)}:11Z ERROR auth failed for request 7f3a2c: {text}")
    if rng.random() < 0.25:
        k = private_key(rng)
        labels.append(["private_key", k])
        parts.append(k)
    return {"text": "\n".join(parts), "labels": labels}


def clean(rng: random.Random) -> Sample:
    """Technical text with nothing personal or secret: what must pass untouched."""
    hexd = "0123456789abcdef"
    uuid = (
        f"{_chars(rng, 8, hexd)}-{_chars(rng, 4, hexd)}-4{_chars(rng, 3, hexd)}-a{_chars(rng, 3, hexd)}-{_chars(rng, 12, hexd)}"
    )
    sha = _chars(rng, 40, hexd)
    choices = [
        f"commit {sha}\nAuthor: build bot\nDate:   2024-03-1{rng.randint(0, 9)} 14:3{rng.randint(0, 9)}:07 +0000\n\n    Bump version to v{rng.randint(1, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 99)}",
        f"2024-11-0{rng.randint(1, 9)} 08:15:4{rng.randint(0, 9)}.{rng.randint(100, 999)} INFO  [main] Listening on http://127.0.0.1:{rng.randint(1024, 65535)} (pid {rng.randint(100, 99999)})",
        json.dumps(
            {
                "id": uuid,
                "status": "done",
                "duration_ms": rng.randint(1, 99999),
                "created_at": 1700000000 + rng.randint(0, 10**7),
                "version": "2.14.1",
            }
        ),
        f"Order {rng.randint(10**15, 10**16 - 1)} shipped on 2024-0{rng.randint(1, 9)}-2{rng.randint(0, 8)}; tracking 1Z{_chars(rng, 16, string.ascii_uppercase + string.digits)}",
        f"Ticket JIRA-{rng.randint(100, 99999)} resolved in release 1.{rng.randint(0, 40)}.{rng.randint(0, 9)}-rc.{rng.randint(1, 5)}",
        f"/var/log/nginx/access.log.{rng.randint(1, 9)}.gz  {rng.randint(1000, 9999999)} bytes  modified 2024-10-31 23:59:59",
        f"sha256:{_chars(rng, 64, hexd)}  registry/app:{rng.randint(1, 9)}.{rng.randint(0, 9)}.{rng.randint(0, 9)}",
        f"Build {rng.randint(2020, 2026)}{rng.randint(10, 12)}{rng.randint(10, 28)}{rng.randint(100000, 235959)} finished: {rng.randint(100, 2000)} tests passed, 0 failed in {rng.randint(1, 99)}.{rng.randint(0, 9)}s",
        f"pod web-{_chars(rng, 10, hexd)}-{_chars(rng, 5, 'bcdfghjklmnpqrstvwxz2456789')} restarted; node ip-10-0-{rng.randint(0, 255)}-{rng.randint(0, 255)}.ec2.internal",
        f"SELECT * FROM orders WHERE id = {rng.randint(10**9, 10**10)} AND created_at > '2024-01-01 00:00:00' LIMIT {rng.randint(10, 500)};",
        f"Windows 10.0.{rng.randint(10000, 22631)}.{rng.randint(1000, 4000)}, Python 3.{rng.randint(8, 13)}.{rng.randint(0, 12)}, timestamp {rng.randint(10**12, 2 * 10**12)}",
        f"Invoice INV-{rng.randint(10**6, 10**7)} total $1,{rng.randint(100, 999)}.{rng.randint(10, 99)} due 30/0{rng.randint(1, 9)}/2025, PO {rng.randint(10**11, 10**12)}",
        f"integrity sha512-{_chars(rng, 86, string.ascii_letters + string.digits + '+/')}==",
        f"ISBN 978-{rng.randint(0, 1)}-{rng.randint(100, 999)}-{rng.randint(10000, 99999)}-{rng.randint(0, 9)}; DOI 10.{rng.randint(1000, 9999)}/{_chars(rng, 8, string.ascii_lowercase + string.digits)}",
        f"snowflake {rng.randint(10**17, 10**18)} posted at 12:{rng.randint(10, 59)}; coordinates 52.{rng.randint(100000, 999999)}, 13.{rng.randint(100000, 999999)}",
        f"MAC 3c:22:fb:{_chars(rng, 2, hexd)}:{_chars(rng, 2, hexd)}:{_chars(rng, 2, hexd)} link up at 1000 Mbps; serial {_chars(rng, 12, string.ascii_uppercase + string.digits)}",
        f"password_reset_url = https://app.example.com/reset (expires in {rng.randint(5, 60)} minutes); token_ttl = 3600",
        f"request_id={uuid} trace_id={_chars(rng, 32, hexd)} span_id={_chars(rng, 16, hexd)} latency={rng.randint(1, 999)}ms",
        f'api_key_env = "OPENAI_API_KEY"\npassword: ${{DB_PASSWORD}}\nsecret_name = prod/db/{rng.choice(["primary", "replica"])}',
        f"Call 1-800-FLOWERS? No: meeting room 4.{rng.randint(10, 99)}, dial-in extension {rng.randint(1000, 9999)}, PIN {rng.randint(100000, 999999)}#",
    ]
    return {"text": rng.choice(choices), "labels": []}


def build(seed: int = 36, count: int = 400) -> list[Sample]:
    """`count` samples, half sensitive and half clean, the same for the same seed."""
    rng = random.Random(seed)
    return [sensitive(rng) if i % 2 == 0 else clean(rng) for i in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=36)
    parser.add_argument("--count", type=int, default=400)
    args = parser.parse_args()
    for sample in build(args.seed, args.count):
        sys.stdout.write(json.dumps(sample, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
