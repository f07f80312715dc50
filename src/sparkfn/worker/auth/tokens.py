"""A worker's bearer tokens: JWTs signed with HS256 (a shared secret) or RS256 (a key pair).

As in Pulsar's token authentication, a client sends ``Authorization: Bearer
<jwt>`` and the token's ``sub`` claim names the caller. sparkfn adds what the
caller may do as claims of its own: ``role`` (``superuser`` or
``tenant_admin``) and, for a tenant admin, ``tenant``. ``exp`` is required:
a token that never expires is refused.

>>> keys = TokenKeys.load(secret_key="a-secret-of-at-least-32-bytes-long")
>>> token = keys.issue(Principal("ci", Role.TENANT_ADMIN, "acme"), timedelta(days=1))
>>> keys.verify(token)
Principal(subject='ci', role=<Role.TENANT_ADMIN: 'tenant_admin'>, tenant='acme')

Only the configured algorithm is accepted (never ``none``, and an RS256
worker never takes an HS256 token signed with its public key). Keys are
given as Pulsar gives ``tokenSecretKey`` and ``tokenPublicKey``: the value
itself (a secret), a path (a PEM file), ``file:PATH`` or
``data:;base64,<base64>``.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, overload

import jwt
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey, RSAPublicKey
from cryptography.hazmat.primitives.serialization import (
    load_pem_private_key,
    load_pem_public_key,
)

from sparkfn.api.errors import AuthError, ConfigError
from sparkfn.config.fields import check_name

HS256 = "HS256"
RS256 = "RS256"
# RFC 7518 3.2: an HMAC key at least as long as the hash; NIST: RSA of 2048 bits.
MIN_SECRET_BYTES = 32
MIN_RSA_BITS = 2048


class Role(StrEnum):
    """What a token's holder may do."""

    SUPERUSER = "superuser"  # every route, every tenant
    TENANT_ADMIN = "tenant_admin"  # the functions, state, topics and packages of one tenant


@dataclass(frozen=True)
class Principal:
    """Who made a request: a token's subject, role and (for a tenant admin) tenant."""

    subject: str
    role: Role
    tenant: str | None = None

    def __post_init__(self) -> None:
        if not self.subject:
            msg = "a token's subject must not be empty"
            raise ConfigError(msg)
        if self.role is Role.TENANT_ADMIN and not self.tenant:
            msg = f"subject {self.subject!r}: a tenant_admin token needs a tenant"
            raise ConfigError(msg)
        if self.tenant is not None:
            try:
                check_name(self.tenant, "tenant")
            except ValueError as exc:
                raise ConfigError(str(exc)) from None

    @property
    def is_superuser(self) -> bool:
        """Whether this principal may do everything."""
        return self.role is Role.SUPERUSER

    def describe(self) -> str:
        """``'alice' (tenant_admin of acme)``, for error messages."""
        scope = f" of {self.tenant}" if self.role is Role.TENANT_ADMIN else ""
        return f"{self.subject!r} ({self.role.value}{scope})"


@dataclass(frozen=True)
class TokenKeys:
    """The keys that sign and verify one worker's tokens, and their algorithm."""

    algorithm: str
    verify_key: bytes | RSAPublicKey = field(repr=False)
    # None when only the public key is configured: such a worker verifies but cannot sign.
    sign_key: bytes | RSAPrivateKey | None = field(repr=False)

    @classmethod
    def load(
        cls,
        *,
        secret_key: str | None = None,
        public_key: str | None = None,
        private_key: str | None = None,
    ) -> TokenKeys:
        """HS256 keys from ``secret_key``, else RS256 keys from a public and/or private PEM key.

        Raises :class:`ConfigError` naming the setting when a key is missing,
        unreadable, too short or of the wrong kind, or when both kinds are given.
        """
        if secret_key and (public_key or private_key):
            msg = (
                "token_secret_key (HS256) and token_public_key/token_private_key (RS256) "
                "are both set; configure one algorithm"
            )
            raise ConfigError(msg)
        if secret_key:
            secret = _key_bytes(secret_key, "token_secret_key", plain_is_path=False)
            if len(secret) < MIN_SECRET_BYTES:
                msg = (
                    f"token_secret_key is {len(secret)} bytes; HS256 needs at least "
                    f"{MIN_SECRET_BYTES} (e.g. `openssl rand -base64 48`)"
                )
                raise ConfigError(msg)
            return cls(HS256, secret, secret)
        if private_key:
            signer = _rsa_key(private_key, private=True)
            verifier = _rsa_key(public_key, private=False) if public_key else signer.public_key()
            if signer.public_key().public_numbers() != verifier.public_numbers():
                msg = "token_private_key is not the private half of token_public_key"
                raise ConfigError(msg)
            return cls(RS256, verifier, signer)
        if public_key:
            return cls(RS256, _rsa_key(public_key, private=False), None)
        msg = (
            "no token key is configured: set token_secret_key (HS256) or "
            "token_public_key and token_private_key (RS256)"
        )
        raise ConfigError(msg)

    def issue(self, principal: Principal, expiry: timedelta, *, now: datetime | None = None) -> str:
        """A token for ``principal`` that expires ``expiry`` from ``now``."""
        if self.sign_key is None:
            msg = (
                "token_private_key is needed to sign tokens; token_public_key alone "
                "only verifies them"
            )
            raise ConfigError(msg)
        if expiry <= timedelta(0):
            msg = f"a token's expiry must be positive; got {expiry}"
            raise ConfigError(msg)
        issued = (now or datetime.now(UTC)).replace(microsecond=0)
        claims: dict[str, Any] = {
            "sub": principal.subject,
            "role": principal.role.value,
            "iat": issued,
            "exp": issued + expiry,
        }
        if principal.tenant is not None:
            claims["tenant"] = principal.tenant
        return jwt.encode(claims, self.sign_key, algorithm=self.algorithm)

    def verify(self, token: str) -> Principal:
        """The principal of a valid token; :class:`AuthError` saying what is wrong with it."""
        try:
            claims = jwt.decode(
                token,
                self.verify_key,
                algorithms=[self.algorithm],
                options={"require": ["exp", "sub"]},
            )
        except jwt.InvalidTokenError as exc:
            raise AuthError(self._why_invalid(token, exc)) from None
        role, tenant = claims.get("role"), claims.get("tenant")
        if role not in set(Role):
            msg = (
                f"the token of {claims['sub']!r} has role {role!r}; a worker knows "
                f"{', '.join(r.value for r in Role)}"
            )
            raise AuthError(msg)
        if tenant is not None and not isinstance(tenant, str):
            msg = f"the token of {claims['sub']!r} has a tenant claim that is not a string"
            raise AuthError(msg)
        try:
            return Principal(claims["sub"], Role(role), tenant)
        except ConfigError as exc:
            msg = f"the token is not usable: {exc}"
            raise AuthError(msg) from None

    def _why_invalid(self, token: str, exc: jwt.InvalidTokenError) -> str:
        if isinstance(exc, jwt.ExpiredSignatureError):
            exp = jwt.decode(token, options={"verify_signature": False}).get("exp")
            when = datetime.fromtimestamp(exp, UTC).isoformat() if exp is not None else "?"
            return f"the token expired at {when}; create a new one"
        if isinstance(exc, jwt.InvalidSignatureError):
            return (
                "the token's signature does not verify: it was altered, or signed "
                "with a key other than this worker's"
            )
        if isinstance(exc, jwt.InvalidAlgorithmError):
            found = _header_alg(token)
            return f"the token is signed with {found}; this worker accepts {self.algorithm} only"
        if isinstance(exc, jwt.MissingRequiredClaimError):
            return f"the token has no {exc.claim!r} claim; a worker accepts only tokens with exp and sub"
        if isinstance(exc, jwt.ImmatureSignatureError):
            return f"the token is not valid yet: {exc}"
        if isinstance(exc, jwt.DecodeError):
            return f"the bearer token is not a well-formed JWT: {exc}"
        return f"the token is invalid: {exc}"


def _header_alg(token: str) -> str:
    try:
        return str(jwt.get_unverified_header(token).get("alg"))
    except jwt.InvalidTokenError:
        return "an unknown algorithm"


def _key_bytes(value: str, setting: str, *, plain_is_path: bool) -> bytes:
    """A key's bytes: ``data:;base64,...``, ``file:PATH``, a path, or (secrets) the text."""
    if value.startswith("data:"):
        _, _, encoded = value.partition(",")
        try:
            return base64.b64decode(encoded, validate=True)
        except binascii.Error as exc:
            msg = f"{setting}: the data: value is not base64: {exc}"
            raise ConfigError(msg) from None
    if value.startswith("file:"):
        value, plain_is_path = value.removeprefix("file:").removeprefix("//"), True
    if not plain_is_path:
        return value.encode()
    try:
        return Path(value).expanduser().read_bytes()
    except OSError as exc:
        msg = f"{setting}: cannot read {value}: {exc.strerror}"
        raise ConfigError(msg) from None


@overload
def _rsa_key(value: str, *, private: Literal[True]) -> RSAPrivateKey: ...
@overload
def _rsa_key(value: str, *, private: Literal[False]) -> RSAPublicKey: ...
def _rsa_key(value: str, *, private: bool) -> RSAPublicKey | RSAPrivateKey:
    """The private or public RSA key ``value`` names (token_private_key, token_public_key)."""
    setting = "token_private_key" if private else "token_public_key"
    kind = RSAPrivateKey if private else RSAPublicKey
    data = _key_bytes(value, setting, plain_is_path=True)
    try:
        key = load_pem_private_key(data, password=None) if private else load_pem_public_key(data)
    except TypeError:  # the private loader, when the key needs a password
        msg = f"{setting} {value}: the key is encrypted; give an unencrypted PEM key"
        raise ConfigError(msg) from None
    except ValueError as exc:
        msg = f"{setting} {value}: not a PEM {'private' if private else 'public'} key ({exc})"
        raise ConfigError(msg) from None
    if not isinstance(key, kind):
        msg = f"{setting} {value}: a {type(key).__name__}; RS256 needs an RSA key"
        raise ConfigError(msg)
    if key.key_size < MIN_RSA_BITS:
        msg = f"{setting} {value}: an RSA key of {key.key_size} bits; RS256 needs at least {MIN_RSA_BITS}"
        raise ConfigError(msg)
    return key
