"""A TLS client certificate's subject as a principal names it (`[serve.principals.NAME]
tls_subject = "CN=ci-bot,O=Example"`): comma-separated ATTRIBUTE=VALUE pairs, every one of which
the certificate's subject must hold (order does not matter; attributes it has beyond them do not
count against it). Attributes by their short names (CN, O, OU, C, L, ST, DC, emailAddress, UID)."""

from __future__ import annotations

# Short names -> the long names Python's ssl module reports in getpeercert()["subject"].
SHORT_NAMES = {
    "CN": "commonName",
    "O": "organizationName",
    "OU": "organizationalUnitName",
    "C": "countryName",
    "L": "localityName",
    "ST": "stateOrProvinceName",
    "DC": "domainComponent",
    "UID": "userId",
    "emailAddress": "emailAddress",
}


def parse_subject(text: str) -> tuple[tuple[str, str], ...]:
    """'CN=alice,O=Example' -> (("commonName", "alice"), ("organizationName", "Example")); a
    comma inside a value is written \\, (RFC 4514). ValueError for anything else."""
    parts: list[str] = []
    current = ""
    escaped = False
    for char in text:
        if escaped:
            current += char
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ",":
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    out = []
    for part in parts:
        key, equals, value = part.strip().partition("=")
        long_name = SHORT_NAMES.get(key.strip()) or SHORT_NAMES.get(key.strip().upper())
        if not equals or long_name is None or not value.strip():
            names = ", ".join(SHORT_NAMES)
            raise ValueError(f"tls_subject {text!r}: expected ATTRIBUTE=VALUE pairs separated by commas ({names})")
        out.append((long_name, value.strip()))
    return tuple(out)


def subject_of(peercert: dict[str, object] | None) -> dict[str, str]:
    """The subject of a certificate as ssl.SSLSocket.getpeercert() gives it, attribute -> value
    (an attribute given twice keeps its values joined by commas)."""
    subject: dict[str, str] = {}
    rdns = peercert.get("subject", ()) if peercert else ()
    for rdn in rdns if isinstance(rdns, tuple) else ():
        for pair in rdn:
            key, value = pair
            subject[key] = f"{subject[key]},{value}" if key in subject else value
    return subject


def subject_text(subject: dict[str, str]) -> str:
    """The subject as a principal would name it (for messages and logs)."""
    short = {long: short for short, long in SHORT_NAMES.items()}
    return ",".join(f"{short.get(key, key)}={value}" for key, value in subject.items())
