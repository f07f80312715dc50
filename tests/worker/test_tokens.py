"""Worker tokens: HS256 and RS256 keys, what verifies, and why a token is refused."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from sparkfn.api.errors import AuthError, ConfigError
from sparkfn.worker.auth.tokens import Principal, Role, TokenKeys
from sparkfn.worker.settings import WorkerSettings, is_loopback

SECRET = "s" * 40
ADMIN = Principal("ci", Role.TENANT_ADMIN, "acme")


def write_rsa_pair(folder: Path, bits: int = 2048) -> tuple[Path, Path]:
    """A fresh RSA key pair as unencrypted PEM files: (public, private)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=bits)
    private = folder / f"private-{bits}.pem"
    public = folder / f"public-{bits}.pem"
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return public, private


def forge(token: str, **claims: object) -> str:
    """``token`` with some claims changed and its signature kept: a tampered token."""
    header, payload, signature = token.split(".")
    body = {**json.loads(base64.urlsafe_b64decode(payload + "==")), **claims}
    forged = base64.urlsafe_b64encode(json.dumps(body).encode()).rstrip(b"=").decode()
    return f"{header}.{forged}.{signature}"


def _reason(keys: TokenKeys, token: str) -> str:
    with pytest.raises(AuthError) as caught:
        keys.verify(token)
    assert caught.value.reason == "unauthorized"
    return str(caught.value)


def test_hs256_round_trip_carries_subject_role_tenant_and_expiry() -> None:
    keys = TokenKeys.load(secret_key=SECRET)
    now = datetime.now(UTC).replace(microsecond=0)
    token = keys.issue(ADMIN, timedelta(days=1), now=now)
    assert keys.verify(token) == ADMIN
    claims = jwt.decode(token, options={"verify_signature": False})
    assert claims == {
        "sub": "ci",
        "role": "tenant_admin",
        "tenant": "acme",
        "iat": int(now.timestamp()),
        "exp": int((now + timedelta(days=1)).timestamp()),
    }
    assert jwt.get_unverified_header(token)["alg"] == "HS256"
    superuser = keys.issue(Principal("ops", Role.SUPERUSER), timedelta(hours=1))
    assert keys.verify(superuser) == Principal("ops", Role.SUPERUSER)


def test_rs256_signs_with_the_private_key_and_verifies_with_the_public_one(tmp_path: Path) -> None:
    public, private = write_rsa_pair(tmp_path)
    signer = TokenKeys.load(private_key=str(private))
    verifier = TokenKeys.load(public_key=f"file://{public}")
    token = signer.issue(ADMIN, timedelta(minutes=5))
    assert jwt.get_unverified_header(token)["alg"] == "RS256"
    assert verifier.verify(token) == ADMIN
    assert TokenKeys.load(public_key=str(public), private_key=str(private)).verify(token) == ADMIN
    with pytest.raises(ConfigError, match="token_private_key is needed to sign"):
        verifier.issue(ADMIN, timedelta(minutes=5))


def test_an_expired_token_says_when_it_expired() -> None:
    keys = TokenKeys.load(secret_key=SECRET)
    then = datetime(2020, 1, 1, tzinfo=UTC)
    message = _reason(keys, keys.issue(ADMIN, timedelta(hours=1), now=then))
    assert "expired at 2020-01-01T01:00:00+00:00" in message


def test_a_tampered_token_does_not_verify() -> None:
    keys = TokenKeys.load(secret_key=SECRET)
    forged = forge(keys.issue(ADMIN, timedelta(hours=1)), role="superuser")
    assert "signature does not verify" in _reason(keys, forged)
    other = TokenKeys.load(secret_key="o" * 40).issue(ADMIN, timedelta(hours=1))
    assert "signature does not verify" in _reason(keys, other)
    assert "not a well-formed JWT" in _reason(keys, "not-a-jwt")


def test_only_the_configured_algorithm_is_accepted(tmp_path: Path) -> None:
    public, private = write_rsa_pair(tmp_path)
    rs256 = TokenKeys.load(public_key=str(public))
    claims = {"sub": "x", "role": "superuser", "exp": datetime.now(UTC) + timedelta(hours=1)}
    unsigned = jwt.encode(claims, None, algorithm="none")
    assert "signed with none; this worker accepts RS256 only" in _reason(rs256, unsigned)
    # Algorithm confusion: an HS256 token whose HMAC key is the worker's public PEM.
    confused = hmac_token(claims, public.read_bytes())
    assert "signed with HS256; this worker accepts RS256 only" in _reason(rs256, confused)
    hs256 = TokenKeys.load(secret_key=SECRET)
    rs_token = TokenKeys.load(private_key=str(private)).issue(ADMIN, timedelta(hours=1))
    assert "signed with RS256; this worker accepts HS256 only" in _reason(hs256, rs_token)


def hmac_token(claims: dict[str, object], key: bytes) -> str:
    """An HS256 JWT made by hand: PyJWT refuses a PEM as an HMAC key, an attacker does not."""

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    body = {k: int(v.timestamp()) if isinstance(v, datetime) else v for k, v in claims.items()}
    signing_input = b64(b'{"alg":"HS256","typ":"JWT"}') + "." + b64(json.dumps(body).encode())
    mac = hmac.new(key, signing_input.encode(), hashlib.sha256).digest()
    return signing_input + "." + b64(mac)


def test_a_token_without_exp_or_with_an_unknown_role_is_refused() -> None:
    keys = TokenKeys.load(secret_key=SECRET)
    forever = jwt.encode({"sub": "x", "role": "superuser"}, SECRET.encode(), algorithm="HS256")
    assert "no 'exp' claim" in _reason(keys, forever)
    soon = datetime.now(UTC) + timedelta(hours=1)
    admin = jwt.encode(
        {"sub": "x", "role": "admin", "exp": soon}, SECRET.encode(), algorithm="HS256"
    )
    assert "has role 'admin'" in _reason(keys, admin)
    no_tenant = jwt.encode(
        {"sub": "x", "role": "tenant_admin", "exp": soon}, SECRET.encode(), algorithm="HS256"
    )
    assert "needs a tenant" in _reason(keys, no_tenant)


def test_keys_that_cannot_be_used_are_refused_with_the_setting_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="token_secret_key is 5 bytes; HS256 needs at least 32"):
        TokenKeys.load(secret_key="short")
    data = "data:;base64," + base64.b64encode(b"k" * 32).decode()
    assert TokenKeys.load(secret_key=data).verify_key == b"k" * 32
    with pytest.raises(ConfigError, match="are both set"):
        TokenKeys.load(secret_key=SECRET, public_key="x.pem")
    with pytest.raises(ConfigError, match="no token key is configured"):
        TokenKeys.load()
    with pytest.raises(ConfigError, match="token_public_key: cannot read .*missing.pem"):
        TokenKeys.load(public_key=str(tmp_path / "missing.pem"))
    public, _ = write_rsa_pair(tmp_path)
    (tmp_path / "other").mkdir()
    _, other_private = write_rsa_pair(tmp_path / "other")
    with pytest.raises(ConfigError, match="not the private half"):
        TokenKeys.load(public_key=str(public), private_key=str(other_private))
    with pytest.raises(ConfigError, match="not a PEM private key"):
        TokenKeys.load(private_key=str(public))
    small, _ = write_rsa_pair(tmp_path, bits=1024)
    with pytest.raises(ConfigError, match="an RSA key of 1024 bits; RS256 needs at least 2048"):
        TokenKeys.load(public_key=str(small))
    ec_key = tmp_path / "ec.pem"
    ec_key.write_bytes(
        ec.generate_private_key(ec.SECP256R1()).private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    with pytest.raises(ConfigError, match="RS256 needs an RSA key"):
        TokenKeys.load(private_key=str(ec_key))
    locked = tmp_path / "locked.pem"
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    locked.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"pass"),
        )
    )
    with pytest.raises(ConfigError, match="the key is encrypted"):
        TokenKeys.load(private_key=str(locked))


def test_settings_refuse_auth_off_on_a_non_loopback_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for host in ("127.0.0.1", "::1", "localhost", "127.0.0.2"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "::", "10.1.2.3", "worker.example.com"):
        assert not is_loopback(host), host
    with pytest.raises(
        ConfigError, match="host '0.0.0.0' is not a loopback address and auth is off"
    ):
        WorkerSettings.resolve(data_dir=tmp_path, host="0.0.0.0")
    assert WorkerSettings.resolve(data_dir=tmp_path, host="0.0.0.0", allow_unauthenticated=True)
    with pytest.raises(ConfigError, match="no token key is configured"):
        WorkerSettings.resolve(data_dir=tmp_path, auth_enabled=True)
    monkeypatch.setenv("SPARKFN_WORKER_AUTH_ENABLED", "true")
    monkeypatch.setenv("SPARKFN_WORKER_TOKEN_SECRET_KEY", SECRET)
    settings = WorkerSettings.resolve(data_dir=tmp_path, host="0.0.0.0")
    assert settings.auth_enabled and SECRET not in repr(settings)
    assert SECRET not in repr(settings.token_keys())
    token = settings.token_keys().issue(ADMIN, timedelta(hours=1))
    assert TokenKeys.load(secret_key=SECRET).verify(token) == ADMIN
