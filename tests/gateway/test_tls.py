"""HTTPS without a proxy: `llmc serve --http ADDR --tls-cert FILE --tls-key FILE`, and mutual TLS
with `--tls-client-ca` (a principal named by its certificate's subject, `tls_subject`).
Certificates are made here, at test time: a CA, the gateway's (for 127.0.0.1) and clients'."""

from __future__ import annotations

import asyncio
import datetime
import http.client
import ipaddress
import json
import socket
import ssl
import time
from pathlib import Path
from typing import Any

import pytest

from tests.gateway.inprocess import gateway_in_process
from tests.gateway.test_admission import ALICE, bearer, with_principals
from tests.gateway.test_http import INIT
from tests.gateway.test_stdio import run
from tests.helpers import llmc


class Pki:
    """A test CA and the PEM files it signed, in `where`."""

    def __init__(self, where: Path) -> None:
        from cryptography.hazmat.primitives.asymmetric import ec

        self.where = where
        self.ca_key = ec.generate_private_key(ec.SECP256R1())
        self.ca_name = self._name("llmc test CA")
        self.ca = self._certificate(self.ca_name, self.ca_key, self.ca_key.public_key(), ca=True)
        self.ca_file = self._write("ca.pem", self.ca)

    @staticmethod
    def _name(common: str, org: str | None = None) -> Any:
        from cryptography import x509
        from cryptography.x509.oid import NameOID

        attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common)]
        if org:
            attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
        return x509.Name(attributes)

    def _certificate(self, subject: Any, key: Any, public: Any, *, ca: bool = False, server: bool = False) -> Any:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes
        from cryptography.x509.oid import ExtendedKeyUsageOID

        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self.ca_name if not ca else subject)
            .public_key(public)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
            )
            builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False)
        elif not ca:
            builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), False)
        return builder.sign(self.ca_key if not ca else key, hashes.SHA256())

    def _write(self, name: str, certificate: Any) -> str:
        from cryptography.hazmat.primitives import serialization

        path = self.where / name
        path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        return str(path)

    def issue(self, name: str, common: str, org: str | None = None, *, server: bool = False) -> tuple[str, str]:
        """(certificate file, key file) for `common` (and `org`)."""
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ec

        key = ec.generate_private_key(ec.SECP256R1())
        cert = self._write(f"{name}.pem", self._certificate(self._name(common, org), key, key.public_key(), server=server))
        key_file = self.where / f"{name}-key.pem"
        key_file.write_bytes(
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        )
        return cert, str(key_file)

    def client_context(self, client: tuple[str, str] | None = None) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.ca_file)
        if client is not None:
            context.load_cert_chain(*client)
        return context


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    (tmp_path / "pki").mkdir()
    return Pki(tmp_path / "pki")


def https(
    port: int, context: ssl.SSLContext, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, bytes]:
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=30)
    try:
        data = json.dumps(body).encode() if body is not None else None
        conn.request(
            method,
            path,
            body=data,
            headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **(headers or {})},
        )
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def test_https_serves_hosts_and_refuses_plain_http(gateway_profile: Path, pki: Pki) -> None:
    from llmc_cli.gateway.http_server import Tls

    cert, key = pki.issue("gateway", "127.0.0.1", server=True)
    with gateway_in_process(gateway_profile, tls=Tls(cert, key)) as gateway:
        assert https(gateway.port, pki.client_context(), "GET", "/healthz")[0] == 200

        async def work() -> None:  # the mcp SDK's own client, over HTTPS, both eras
            import httpx2
            from mcp.client.client import Client
            from mcp.client.streamable_http import streamable_http_client
            from mcp_types import Implementation

            url = f"https://127.0.0.1:{gateway.port}/mcp"
            for mode in ("legacy", "auto"):
                client_http = httpx2.AsyncClient(verify=pki.client_context(), timeout=60)
                transport = streamable_http_client(url, http_client=client_http)
                async with Client(transport, mode=mode, client_info=Implementation(name="tls-host", version="1")) as client:
                    assert "sdk.add" in {t.name for t in (await client.list_tools()).tools}
                    assert (await client.call_tool("sdk.add", {"a": 2, "b": 3})).structured_content == {"result": 5}

        run(work)
        with pytest.raises((ConnectionError, http.client.HTTPException)):
            gateway.request("GET", "/healthz")  # http:// on the TLS port: no TLS handshake, no answer
        lines = list(gateway.lines)
    assert any(f"https://127.0.0.1:{gateway.port}/mcp" in line for line in lines), lines


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_a_client_that_never_says_hello_is_dropped_at_the_head_deadline(
    gateway_profile: Path, pki: Pki, loop: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A TCP connection to the TLS port that sends nothing (or half a ClientHello) is closed when
    a request's head would be late (here 1 s), not after the event loop's 60 s handshake
    timeout: on uvloop's loop (the `fast` extra) and on asyncio's."""
    from llmc_cli.gateway.http_server import Tls

    if loop == "uvloop":
        pytest.importorskip("uvloop")
    else:
        monkeypatch.setenv("LLMC_EVENT_LOOP", "asyncio")
    cert, key = pki.issue("gateway", "127.0.0.1", server=True)
    with gateway_in_process(gateway_profile, tls=Tls(cert, key), pending_seconds=1.0) as gateway:
        for opening in (b"", b"\x16\x03\x01"):  # silence; the first bytes of a TLS record, then silence
            with socket.create_connection(("127.0.0.1", gateway.port), timeout=30) as sock:
                sock.sendall(opening)
                started = time.monotonic()
                try:
                    assert sock.recv(1) == b""  # closed by the gateway (30 s: the test's own bound)
                except ConnectionResetError:
                    pass
                assert time.monotonic() - started < 30
        assert https(gateway.port, pki.client_context(), "GET", "/healthz")[0] == 200  # the others served as ever
        # Asked only now: the serving thread sets its loop once it runs, which a request proves.
        served_by = type(gateway.running.loop)
        expected = asyncio.SelectorEventLoop if loop == "asyncio" else __import__("uvloop").Loop
        assert issubclass(served_by, expected), served_by


def test_a_client_certificate_proves_a_principal(gateway_profile: Path, pki: Pki, monkeypatch: pytest.MonkeyPatch) -> None:
    """--tls-client-ca: carol has no token, her certificate (CN=carol, O=Example) proves her;
    a certificate the CA signed that no principal names proves nobody; no certificate, no TLS."""
    from llmc_cli.gateway.http_server import Tls

    monkeypatch.setenv("GW_ALICE", ALICE)
    monkeypatch.setenv("GW_BOB", "bob-token-0123456789abcdef")
    profile = with_principals(gateway_profile)
    profile.write_text(profile.read_text() + '\n[serve.principals.carol]\ntls_subject = "CN=carol,O=Example"\n')
    cert, key = pki.issue("gateway", "127.0.0.1", server=True)
    carol = pki.issue("carol", "carol", "Example")
    mallory = pki.issue("mallory", "mallory", "Example")
    with gateway_in_process(profile, tls=Tls(cert, key, pki.ca_file)) as gateway:
        status, body = https(gateway.port, pki.client_context(carol), "GET", "/status")
        assert status == 200 and json.loads(body)["principal"] == "carol"
        assert https(gateway.port, pki.client_context(carol), "POST", "/mcp", INIT)[0] == 200
        assert https(gateway.port, pki.client_context(mallory), "GET", "/status")[0] == 401
        status, body = https(gateway.port, pki.client_context(mallory), "GET", "/status", headers=bearer(ALICE))
        assert status == 200 and json.loads(body)["principal"] == "alice"  # a token still works beside a certificate
        assert json.loads(body)["auth"] == "bearer+tls"
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            https(gateway.port, pki.client_context(), "GET", "/healthz")  # no certificate: no handshake


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--tls-cert", "CERT"], "--tls-cert and --tls-key go together"),
        (["--tls-cert", "CERT", "--tls-key", "MISSING"], "cannot use them"),
        (["--tls-cert", "CERT", "--tls-key", "KEY", "--tls-client-ca", "MISSING"], "--tls-client-ca"),
    ],
)
def test_bad_tls_options_are_one_line_and_exit_2(gateway_profile: Path, pki: Pki, extra: list[str], message: str) -> None:
    cert, key = pki.issue("gateway", "127.0.0.1", server=True)
    swapped = [{"CERT": cert, "KEY": key, "MISSING": str(pki.where / "missing.pem")}.get(a, a) for a in extra]
    proc = llmc("serve", "-p", str(gateway_profile), "--http", "127.0.0.1:0", *swapped)
    assert proc.returncode == 2 and message in proc.stderr and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_plain_http_off_loopback_is_said_at_start(gateway_profile: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing listens off loopback here: the start-up lines of a gateway for such an address."""
    from llmc_cli.config.profiles import load_profile
    from llmc_cli.gateway.hosts import HttpGateway
    from llmc_cli.gateway.http_server import _announce
    from llmc_cli.gateway.toolbox import Toolbox

    monkeypatch.setenv("GW_ALICE", ALICE)
    monkeypatch.setenv("GW_BOB", "bob-token-0123456789abcdef")
    profile = with_principals(gateway_profile)
    for behind_proxy, warned in ((False, True), (True, False)):
        if behind_proxy:
            profile.write_text(
                profile.read_text().replace(
                    'description = "gateway tests"', 'description = "gateway tests"\n[serve]\nbehind_proxy = true\n'
                )
            )
        toolbox = Toolbox(load_profile(str(profile)))
        gateway = HttpGateway(toolbox, "192.0.2.10", 8443)
        lines: list[str] = []
        try:
            _announce(gateway, toolbox, 8443, None, lines.append)
        finally:
            gateway.close()
        assert lines[0].startswith("profile gw: http://192.0.2.10:8443/mcp")
        assert any("plain HTTP" in line and "--tls-cert" in line for line in lines) is warned, lines


def test_a_certificate_principal_in_token_list_and_create(gateway_profile: Path) -> None:
    """`token list` says a certificate proves carol; `token create carol` adds a token beside it."""
    gateway_profile.write_text(gateway_profile.read_text() + '\n[serve.principals.carol]\ntls_subject = "CN=carol"\n')
    listed = llmc("serve", "-p", str(gateway_profile), "token", "list", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    assert [r["token"] for r in json.loads(listed.stdout)["principals"]] == ["none (tls)"]
    created = llmc("serve", "-p", str(gateway_profile), "token", "create", "carol")
    assert created.returncode == 0, created.stderr
    text = gateway_profile.read_text()
    assert 'tls_subject = "CN=carol"' in text and "token_sha256" in text
