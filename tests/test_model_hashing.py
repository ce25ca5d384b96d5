"""lean.sha256 and lean.hmac_sha256 (issue 34): the digests of hashlib and hmac, whichever
implementation a process uses (CPython's own until it has hashed 2 MiB, OpenSSL's after)."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from llmc_cli import lean as model


@pytest.mark.parametrize("size", [0, 1, 55, 56, 64, 65, 1000, 70_000])
def test_digests_are_hashlib_s(size: int) -> None:
    data = bytes(range(256)) * (size // 256 + 1)
    data = data[:size]
    assert model.sha256_hex(data) == hashlib.sha256(data).hexdigest()
    digest = model.sha256(data[: size // 2])
    digest.update(data[size // 2 :])
    assert digest.hexdigest() == hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("key", [b"", b"k", b"k" * 64, b"k" * 65, bytes(range(200))])
@pytest.mark.parametrize("message", [b"", b'{"tool":"t.echo"}', b"\xff" * 1000])
def test_hmac_is_the_stdlib_s(key: bytes, message: bytes) -> None:
    assert model.hmac_sha256(key, message) == hmac.new(key, message, hashlib.sha256).hexdigest()


def test_one_key_hashes_many_messages_alike() -> None:
    """The key's pads are hashed once and copied per message: none is consumed by the one before."""
    key = b"approval-key" * 3
    for message in (b"a", b"b" * 100, b"", b"a"):
        assert model.hmac_sha256(key, message) == hmac.new(key, message, hashlib.sha256).hexdigest()


def test_a_process_that_hashes_much_moves_to_openssl(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model, "_sha256_state", [0, model._builtin_sha256])
    small = b"x" * 1000
    assert model.sha256_hex(small) == hashlib.sha256(small).hexdigest()
    assert model._sha256_state[1] is model._builtin_sha256
    big = b"y" * (model._OPENSSL_AFTER + 1)
    assert model.sha256_hex(big) == hashlib.sha256(big).hexdigest()
    assert model._sha256_state == [-1, hashlib.sha256]
    assert model.sha256_hex(small) == hashlib.sha256(small).hexdigest()


def test_a_key_s_pads_move_to_openssl_with_the_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pads hashed before the switch are hashed again after it (a batch's HMACs then copy OpenSSL
    states, not CPython's slower ones): the same digests either side."""
    monkeypatch.setattr(model, "_sha256_state", [0, model._builtin_sha256])
    monkeypatch.setattr(model, "_hmac_pads", {})
    key, message = b"approval-key" * 3, b'{"arguments":{"message":"1"},"tool":"echo"}'
    expected = hmac.new(key, message, hashlib.sha256).hexdigest()
    assert model.hmac_sha256(key, message) == expected
    assert not isinstance(model._hmac_pads[key][0], type(hashlib.sha256()))
    model.sha256(b"y" * (model._OPENSSL_AFTER + 1))
    assert model.hmac_sha256(key, message) == expected
    assert isinstance(model._hmac_pads[key][0], type(hashlib.sha256())) and model._hmac_pads[key][2] is hashlib.sha256
    assert model.hmac_sha256(key, message) == expected


def test_a_caller_that_will_hash_much_moves_to_openssl_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model, "_sha256_state", [0, model._builtin_sha256])
    model.expect_hashing(1000)  # not past the switch: CPython's still
    assert model._sha256_state == [0, model._builtin_sha256]
    model.sha256(b"x" * 1000)
    model.expect_hashing(model._OPENSSL_AFTER - 1000)
    assert model._sha256_state == [-1, hashlib.sha256]
    assert model.sha256_hex(b"abc") == hashlib.sha256(b"abc").hexdigest()
    model.expect_hashing(10**9)  # once moved, nothing more to do
    assert model._sha256_state == [-1, hashlib.sha256]


def test_a_thousand_call_batch_stays_on_cpython_s(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 1,000-call batch (its records ~1 MB) does not load OpenSSL: its load (~3-6 ms of CPU)
    costs more than it saves on that much hashing (~2.7 ns a byte); a batch of 3,000 does."""
    from llmc_cli.services.batch import AUDIT_BYTES_PER_CALL

    monkeypatch.setattr(model, "_sha256_state", [0, model._builtin_sha256])
    model.expect_hashing(1000 * AUDIT_BYTES_PER_CALL)
    assert model._sha256_state == [0, model._builtin_sha256]
    model.expect_hashing(3000 * AUDIT_BYTES_PER_CALL)
    assert model._sha256_state == [-1, hashlib.sha256]
