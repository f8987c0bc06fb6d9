"""DPoP proofs (RFC 9449) as the bridge makes them, checked with an independent JOSE implementation (PyJWT; the
bridge signs with joserfc), and the installation's key as the vault keeps it. The whole flow (a bound token, a proof
on each request, both nonce challenges) runs end to end in tests/bridge/test_dpop_flow.py and in the conformance
scenarios `auth/dpop` and `auth/dpop-nonce` (tests/conformance)."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
from pathlib import Path

import httpx2
import jwt
import pytest
from joserfc.jwk import ECKey

from bridge.auth.dpop import KEY_SLOT, InstallationKey, make_proof
from bridge.auth.tokens import Cipher, MemoryVault, SqliteVault

pytestmark = pytest.mark.anyio


def verified(proof: str) -> tuple[dict[str, object], dict[str, object]]:
    """The proof's header and claims, its signature checked with the key its header carries (as a server does)."""
    header = jwt.get_unverified_header(proof)
    public = jwt.PyJWK(header["jwk"], algorithm="ES256")
    claims = jwt.decode(proof, public, algorithms=["ES256"], options={"verify_aud": False})
    return header, claims


def thumbprint(jwk: dict[str, object]) -> str:
    """RFC 7638, written out: what a token's `cnf.jkt` names."""
    members = json.dumps({k: jwk[k] for k in ("crv", "kty", "x", "y")}, separators=(",", ":"), sort_keys=True)
    return base64.urlsafe_b64encode(hashlib.sha256(members.encode()).digest()).rstrip(b"=").decode()


def read_all(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in folder.iterdir())


def test_a_proof_for_a_request_with_a_token_names_the_request_and_hashes_the_token() -> None:
    key = ECKey.generate_key("P-256", private=True)
    url = httpx2.URL("https://mcp.example.com/mcp?session=1#frag")
    proof = make_proof(key, "POST", url, access_token="at-123.456", nonce="n-1")
    header, claims = verified(proof)
    assert header["typ"] == "dpop+jwt" and header["alg"] == "ES256"
    jwk = header["jwk"]
    assert isinstance(jwk, dict) and "d" not in jwk  # only the public half travels
    assert thumbprint(jwk) == key.thumbprint()
    assert claims["htm"] == "POST" and claims["htu"] == "https://mcp.example.com/mcp"  # no query, no fragment
    assert abs(int(str(claims["iat"])) - time.time()) < 5
    expected_ath = base64.urlsafe_b64encode(hashlib.sha256(b"at-123.456").digest()).rstrip(b"=").decode()
    assert claims["ath"] == expected_ath and claims["nonce"] == "n-1"


def test_a_token_request_proof_has_no_token_hash_and_every_proof_is_fresh() -> None:
    key = ECKey.generate_key("P-256", private=True)
    url = httpx2.URL("https://as.example.com/token")
    first, second = (verified(make_proof(key, "POST", url))[1] for _ in range(2))
    assert "ath" not in first and "nonce" not in first
    assert first["jti"] != second["jti"]


async def test_the_installation_key_is_made_once_and_kept_sealed(tmp_path: Path) -> None:
    token_key = base64.b64encode(secrets.token_bytes(32)).decode()
    path = tmp_path / "tokens.db"
    vault = SqliteVault(path, Cipher.from_env("K", {"K": token_key}))
    try:
        made = await InstallationKey(vault).key()
        again = await InstallationKey(vault).key()  # another process, later
        assert again.thumbprint() == made.thumbprint()
        stored = await vault.get(*KEY_SLOT)
        assert stored is not None and "d" in stored
    finally:
        vault.close()
    on_disk = read_all(tmp_path)
    private = str(stored["d"]).encode()
    assert private not in on_disk and b"P-256" not in on_disk  # sealed like every token


async def test_without_a_token_key_the_key_lives_as_long_as_the_process() -> None:
    vault = MemoryVault()
    assert (await InstallationKey(vault).key()).thumbprint() == (await InstallationKey(vault).key()).thumbprint()
    assert (await InstallationKey(MemoryVault()).key()).thumbprint() != \
        (await InstallationKey(vault).key()).thumbprint()
