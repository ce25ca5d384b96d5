"""The DLP detectors: what in a text is personal data or a credential, as (kind, start, end) spans.

Chosen by measurement on the labelled set of bench/dlp_set.py (bench/RESULTS.md, "DLP detectors"):
- email: the address pattern, its top-level domain letters only (no network look-up of a suffix
  list, which Presidio's recognizer makes through tldextract);
- phone: Google's libphonenumber (PyPI package phonenumberslite), VALID leniency, kept only when
  written like a phone number: an international "+", punctuation between its groups, or a
  context word (phone, tel, mobile, ...) just before it; a bare run of digits is an id;
- credit_card: Luhn, a brand's prefix and length, and grouping or a context word;
- iban: the country's length from the IBAN registry and the mod-97 check;
- secret: detect-secrets' provider patterns (AWS, GitHub, Slack, OpenAI, Stripe, GitLab, npm, PyPI,
  SendGrid, Twilio, Discord, Telegram, JWT, Mailchimp, ...), the providers it lacks (Anthropic,
  Google API keys, GitHub fine-grained tokens), and high-entropy values under a secret-looking key;
- private_key: a PEM/OpenSSH/PGP private key block, whole;
- profile_secret: the profile's and environment's own secret values (config/secrets.py), in every
  spelling the Masker knows.
Heavy packages are imported on first use, not at start-up.
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Callable, Iterable
from functools import cache

from llmc_cli.config.schema import DLP_DETECTORS as DETECTORS  # noqa: F401 (the names a profile may use)
from llmc_cli.config.secrets import is_secret_name
from llmc_cli.model import dataclass


@dataclass(frozen=True)
class Found:
    kind: str
    start: int
    end: int


# --- email -------------------------------------------------------------------------------------

_EMAIL = re.compile(
    r"(?<![\w.%+-])[A-Za-z0-9](?:[A-Za-z0-9._%+-]{0,62}[A-Za-z0-9_%+-])?@"
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+([A-Za-z]{2,24})(?![\w-])"
)


def emails(text: str) -> Iterable[Found]:
    if "@" not in text:
        return
    for m in _EMAIL.finditer(text):
        yield Found("email", m.start(), m.end())


# --- phone -------------------------------------------------------------------------------------

_PHONE_CONTEXT = re.compile(r"(?i)\b(?:phone|tel|telephone|mobile|cell|fax|call|dial|whatsapp|sms|contact)\b[^\n]{0,24}$")
_PHONE_PUNCTUATION = re.compile(r"\d[\s.\-)(/]+(?=\d)")


def phones(text: str, regions: tuple[str, ...] = ("US",)) -> Iterable[Found]:
    if sum(c.isdigit() for c in text) < 7:
        return
    import phonenumbers

    seen: set[tuple[int, int]] = set()
    for region in regions:
        for match in phonenumbers.PhoneNumberMatcher(text, region, leniency=phonenumbers.Leniency.VALID):
            where = (match.start, match.end)
            if where in seen:
                continue
            seen.add(where)
            raw = match.raw_string
            before = text[max(0, match.start - 40) : match.start]
            if _inside_token(text, match.start, match.end):
                continue
            # Grouped as a phone number is (two breaks at least: "13.102153" is a decimal).
            if raw.startswith("+") or len(_PHONE_PUNCTUATION.findall(raw)) >= 2 or _PHONE_CONTEXT.search(before):
                yield Found("phone", match.start, match.end)


def _inside_token(text: str, start: int, end: int) -> bool:
    """A match glued to letters, digits or id punctuation (part of a longer identifier, a date, a path)."""
    left = text[start - 1] if start > 0 else " "
    right = text[end] if end < len(text) else " "
    return left.isalnum() or left in "_/#=-" or right.isalnum() or right in "_/-"


# --- credit_card -------------------------------------------------------------------------------

_CARD = re.compile(r"(?<![\w.-])(?:\d[ -]?){12,18}\d(?![\w]|[.-]\d)")
_CARD_CONTEXT = re.compile(
    r"(?i)\b(?:card|credit|debit|visa|master ?card|amex|american express|discover|jcb|diners|cc|pan|cardnumber|payment)\b"
)


def luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _card_brand(digits: str) -> bool:
    """Is this a length a card network issues with this prefix (IIN)?"""
    n, two, four = len(digits), int(digits[:2]), int(digits[:4])
    if digits[0] == "4":
        return n in (13, 16, 19)
    if 51 <= two <= 55 or 2221 <= four <= 2720:
        return n == 16
    if two in (34, 37):
        return n == 15
    if digits.startswith("6011") or two == 65 or 644 <= int(digits[:3]) <= 649:
        return n in (16, 19)
    if 3528 <= four <= 3589:
        return 16 <= n <= 19
    if two in (36, 38, 39) or 300 <= int(digits[:3]) <= 305:
        return 14 <= n <= 19
    if two == 62:
        return 16 <= n <= 19
    return False


def credit_cards(text: str) -> Iterable[Found]:
    for m in _CARD.finditer(text):
        raw = m.group()
        digits = raw.replace(" ", "").replace("-", "")
        if not (13 <= len(digits) <= 19 and _card_brand(digits) and luhn(digits)):
            continue
        grouped = bool(re.fullmatch(r"\d{4}([ -])\d{4}\1\d{4}\1\d{4}(?:\1\d{1,3})?|\d{4}([ -])\d{6}\2\d{4,5}", raw))
        if grouped or _CARD_CONTEXT.search(text[max(0, m.start() - 40) : m.start()]):
            yield Found("credit_card", m.start(), m.end())


# --- iban --------------------------------------------------------------------------------------

# Lengths from the SWIFT IBAN registry.
_IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BR": 29, "BY": 28,
    "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18,
    "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22,
    "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20,
    "LU": 20, "LV": 21, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15,
    "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "SA": 24, "SC": 31, "SE": 24, "SI": 19,
    "SK": 24, "SM": 27, "ST": 25, "SV": 28, "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}  # fmt: skip
_IBAN = re.compile(r"(?<![A-Za-z0-9])([A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?)(?![A-Za-z0-9])")


def iban_valid(candidate: str) -> bool:
    compact = candidate.replace(" ", "")
    if _IBAN_LENGTHS.get(compact[:2]) != len(compact):
        return False
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1


def ibans(text: str) -> Iterable[Found]:
    for m in _IBAN.finditer(text):
        candidate = m.group(1)
        # A grouped match may have run one group into the next word: try the longest valid prefix.
        while candidate:
            if iban_valid(candidate):
                yield Found("iban", m.start(1), m.start(1) + len(candidate))
                break
            cut = candidate.rfind(" ")
            candidate = candidate[:cut] if cut > 4 else ""


# --- secret ------------------------------------------------------------------------------------

# Providers detect-secrets (1.5) has no plugin for.
_MORE_SECRETS = [
    re.compile(r"sk-ant-(?:api|admin)\d\d-[A-Za-z0-9_-]{80,120}"),  # Anthropic
    re.compile(r"AIza[0-9A-Za-z_-]{35}"),  # Google API keys
    re.compile(r"github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59}"),  # GitHub fine-grained tokens
    re.compile(r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,200}"),  # OpenAI project and service keys
    re.compile(r"sk_test_[0-9a-zA-Z]{24,99}"),  # Stripe test keys (detect-secrets: live keys)
    re.compile(r"gh[pousr]_[A-Za-z0-9]{36}"),
    re.compile(r"glpat-[A-Za-z0-9_-]{20}"),  # GitLab
    re.compile(r"ya29\.[0-9A-Za-z_-]{20,}"),  # Google OAuth access tokens
    re.compile(r"hf_[A-Za-z]{34}"),  # Hugging Face
]

# detect-secrets plugins whose patterns name a provider's token (the high-entropy, keyword and
# public-IP plugins are not used: they flag git hashes, UUIDs and addresses).
_DS_PLUGINS = {
    "artifactory": "ArtifactoryDetector",
    "aws": "AWSKeyDetector",
    "azure_storage_key": "AzureStorageKeyDetector",
    "discord": "DiscordBotTokenDetector",
    "github_token": "GitHubTokenDetector",
    "gitlab_token": "GitLabTokenDetector",
    "jwt": "JwtTokenDetector",
    "mailchimp": "MailchimpDetector",
    "npm": "NpmDetector",
    "openai": "OpenAIDetector",
    "pypi_token": "PypiTokenDetector",
    "sendgrid": "SendGridDetector",
    "slack": "SlackDetector",
    "square_oauth": "SquareOAuthDetector",
    "stripe": "StripeDetector",
    "telegram_token": "TelegramBotTokenDetector",
    "twilio": "TwilioKeyDetector",
}


@cache
def provider_patterns() -> tuple[re.Pattern[str], ...]:
    """detect-secrets' provider patterns (imported on first use) and ours."""
    found: list[re.Pattern[str]] = []
    for module, name in _DS_PLUGINS.items():
        try:
            plugin = getattr(importlib.import_module(f"detect_secrets.plugins.{module}"), name)
        except (ImportError, AttributeError):
            continue
        found += [p for p in plugin.denylist if isinstance(p, re.Pattern)]
    return tuple(found + _MORE_SECRETS)


_KEYED = re.compile(
    r"""(?ix)
    (?<![A-Za-z0-9_.-])(?P<key>[A-Za-z][A-Za-z0-9_.-]{1,40})["']?\s*(?:=|:|=>)\s*
    (?P<q>["']?)(?P<value>[^\s"',;}{]{12,200})(?P=q)(?!\s*(?:=|:))
    """
)


def entropy(value: str) -> float:
    """Shannon entropy in bits per character."""
    counts: dict[str, int] = {}
    for ch in value:
        counts[ch] = counts.get(ch, 0) + 1
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def _looks_secret(value: str) -> bool:
    if value.startswith(("${", "$", "http://", "https://", "/", "~", "<")) or re.fullmatch(r"[A-Z0-9_]+", value):
        return False  # a placeholder, an environment variable's name, a URL or a path
    if re.fullmatch(r"[0-9a-f-]{32,36}", value) or re.fullmatch(r"\d+", value):
        return False  # a UUID or a number
    classes = sum(bool(re.search(p, value)) for p in (r"[a-z]", r"[A-Z]", r"\d", r"[^A-Za-z0-9]"))
    return classes >= 3 and entropy(value) >= 3.5


def secrets(text: str) -> Iterable[Found]:
    for pattern in provider_patterns():
        for m in pattern.finditer(text):
            start, end = m.span(m.lastindex) if m.lastindex else m.span()
            yield Found("secret", start, end)
    if not any(c in text for c in "=:"):
        return
    for m in _KEYED.finditer(text):
        if is_secret_name(m.group("key")) and _looks_secret(m.group("value")):
            yield Found("secret", m.start("value"), m.end("value"))


# --- private_key -------------------------------------------------------------------------------

_PRIVATE_KEY = re.compile(
    r"-----BEGIN ((?:RSA |DSA |EC |OPENSSH |ENCRYPTED |PGP )?PRIVATE KEY(?: BLOCK)?)-----"
    r"[\s\S]*?(?:-----END \1-----|\Z)"
)


def private_keys(text: str) -> Iterable[Found]:
    if "PRIVATE KEY" not in text:
        return
    for m in _PRIVATE_KEY.finditer(text):
        yield Found("private_key", m.start(), m.end())


# --- the set -----------------------------------------------------------------------------------

FINDERS: dict[str, Callable[[str], Iterable[Found]]] = {
    "email": emails,
    "phone": phones,
    "credit_card": credit_cards,
    "iban": ibans,
    "secret": secrets,
    "private_key": private_keys,
}


def find(
    text: str,
    kinds: Iterable[str],
    known: Callable[[str], Iterable[Found]] | None = None,
    phone_regions: tuple[str, ...] = ("US",),
) -> list[Found]:
    """The findings of `kinds` in `text`, overlaps resolved (the longer span wins, then the
    earlier kind of DETECTORS): non-overlapping spans in order. `known`: the finder of the
    profile's own secrets (profile_secret), when that kind is asked for."""
    spans: list[Found] = []
    for kind in kinds:
        if kind == "profile_secret":
            if known is not None:
                spans += known(text)
        elif kind == "phone":
            spans += phones(text, phone_regions)
        else:
            spans += FINDERS[kind](text)
    spans.sort(key=lambda s: (s.start, -(s.end - s.start)))
    out: list[Found] = []
    for span in spans:
        if out and span.start < out[-1].end:
            if span.end - span.start > out[-1].end - out[-1].start:
                out[-1] = span
            continue
        out.append(span)
    return out


def redact(text: str, spans: list[Found]) -> str:
    """`text` with each span replaced by [REDACTED:kind]."""
    parts: list[str] = []
    at = 0
    for span in spans:
        parts += [text[at : span.start], f"[REDACTED:{span.kind}]"]
        at = span.end
    parts.append(text[at:])
    return "".join(parts)
