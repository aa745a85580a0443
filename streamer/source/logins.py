"""The login steps PyMySQL leaves to packages the streamer doesn't install.

MySQL 8's default authentication (``caching_sha2_password``; the only one MySQL 8.4 enables
by default) and ``sha256_password`` need the password itself once the server has no cached
hash of it (a new account, or after the server restarted or ran FLUSH PRIVILEGES). Over TLS it
is sent as it is; without TLS (``mysql.tls.mode: disabled``, or a server that offers none) it is
XORed with the login's nonce and encrypted with the server's RSA public key, by RSAES-OAEP
with SHA-1 (RFC 8017, 7.1.1). PyMySQL does that through the ``cryptography`` package.

MariaDB's ``ed25519`` authentication signs the login's nonce by Ed25519 (RFC 8032, 5.1.6),
with the SHA-512 of the password where the standard has that of a 32-byte secret key. PyMySQL
does that through PyNaCl.

Neither package is installed with the streamer (PyPy 3.9 has wheels of neither), and PyMySQL
otherwise fails the login with a RuntimeError. ``install()`` gives PyMySQL this module's steps
where it lacks its own: a modular exponentiation, or two scalar multiplications, per login.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import os
from typing import Any, Callable, List, Tuple

from pymysql import _auth
from pymysql.err import OperationalError

from streamer.errors import PatchTargetMissing

_SHA1_LEN = 20
_RSA_ENCRYPTION = bytes.fromhex("2a864886f70d010101")  # OID 1.2.840.113549.1.1.1


def _der(data: bytes, at: int, tag: int) -> Tuple[bytes, int]:
    """The value of the DER element of type ``tag`` at ``at``, and the offset after it."""
    if at + 2 > len(data) or data[at] != tag:
        raise ValueError(f"expected DER tag {tag:#x} at byte {at}")
    size, at = data[at + 1], at + 2
    if size & 0x80:
        n = size & 0x7F
        if n == 0 or n > 4 or at + n > len(data):
            raise ValueError(f"bad DER length at byte {at - 1}")
        size, at = int.from_bytes(data[at:at + n], "big"), at + n
    if at + size > len(data):
        raise ValueError(f"DER element at byte {at} runs past the key's end")
    return data[at:at + size], at + size


def public_key(pem: bytes) -> Tuple[int, int]:
    """(modulus, public exponent) of a PEM RSA public key: SubjectPublicKeyInfo ("BEGIN PUBLIC
    KEY", what MySQL sends) or PKCS#1 ("BEGIN RSA PUBLIC KEY")."""
    lines = pem.decode("ascii", "replace").strip().splitlines()
    if len(lines) < 3 or not lines[0].startswith("-----BEGIN ") or \
            not lines[-1].startswith("-----END "):
        raise ValueError("not a PEM public key")
    try:
        der = base64.b64decode("".join(lines[1:-1]), validate=True)
    except binascii.Error as exc:
        raise ValueError(f"the PEM body is not base64: {exc}") from None
    if "RSA PUBLIC KEY" not in lines[0]:
        spki, _ = _der(der, 0, 0x30)
        algorithm, at = _der(spki, 0, 0x30)
        oid, _ = _der(algorithm, 0, 0x06)
        if oid != _RSA_ENCRYPTION:
            raise ValueError("the public key is not an RSA key")
        bits, _ = _der(spki, at, 0x03)
        if not bits or bits[0] != 0:
            raise ValueError("the key's bit string has unused bits")
        der = bits[1:]
    body, _ = _der(der, 0, 0x30)
    modulus, at = _der(body, 0, 0x02)
    exponent, _ = _der(body, at, 0x02)
    return int.from_bytes(modulus, "big"), int.from_bytes(exponent, "big")


def _mgf1(seed: bytes, length: int) -> bytes:
    out = b"".join(hashlib.sha1(seed + i.to_bytes(4, "big")).digest()
                   for i in range((length + _SHA1_LEN - 1) // _SHA1_LEN))
    return out[:length]


def _xor(a: bytes, b: bytes) -> bytes:
    return (int.from_bytes(a, "big") ^ int.from_bytes(b, "big")).to_bytes(len(a), "big")


def oaep_encrypt(message: bytes, pem: bytes, random: Callable[[int], bytes] = os.urandom) -> bytes:
    """RSAES-OAEP-ENCRYPT (RFC 8017, 7.1.1) with SHA-1, MGF1-SHA-1 and an empty label."""
    n, e = public_key(pem)
    k = (n.bit_length() + 7) // 8
    if len(message) > k - 2 * _SHA1_LEN - 2:
        raise ValueError(f"{len(message)} bytes are too long for a {k * 8}-bit RSA key "
                         f"(at most {k - 2 * _SHA1_LEN - 2})")
    block = hashlib.sha1(b"").digest() + bytes(k - len(message) - 2 * _SHA1_LEN - 2) + \
        b"\x01" + message
    seed = random(_SHA1_LEN)
    masked_block = _xor(block, _mgf1(seed, k - _SHA1_LEN - 1))
    masked_seed = _xor(seed, _mgf1(masked_block, _SHA1_LEN))
    encoded = int.from_bytes(b"\x00" + masked_seed + masked_block, "big")
    return pow(encoded, e, n).to_bytes(k, "big")


# -- Ed25519 (RFC 8032): the curve -x^2 + y^2 = 1 + d x^2 y^2 over GF(2^255 - 19) ---------------
_P = 2 ** 255 - 19
_L = 2 ** 252 + 27742317777372353535851937790883648493  # the base point's order
_D = -121665 * pow(121666, _P - 2, _P) % _P
_BASE = (15112221349535400772501151409588531511454012693041857206046113283949847762202,
         46316835694926478169428394003475163141307993866256225615783033603165251855960)
Point = Tuple[int, int, int, int]  # extended coordinates (X, Y, Z, T): x = X/Z, y = Y/Z, xy = T/Z


def _add(a: Point, b: Point) -> Point:
    """a + b, by the curve's unified addition (RFC 8032, 5.1.4): doubling too."""
    x1, y1, z1, t1 = a
    x2, y2, z2, t2 = b
    e = (y1 - x1) * (y2 - x2) % _P
    h = (y1 + x1) * (y2 + x2) % _P
    c = 2 * _D * t1 * t2 % _P
    dd = 2 * z1 * z2 % _P
    e, f, g, h = h - e, dd - c, dd + c, h + e
    return e * f % _P, g * h % _P, f * g % _P, e * h % _P


def _base_times(n: int) -> bytes:
    """The encoding of n times the base point (RFC 8032, 5.1.2): y little-endian, x's low bit on
    top."""
    x, y = _BASE
    point: Point = (x, y, 1, x * y % _P)
    total: Point = (0, 1, 1, 0)
    while n:
        if n & 1:
            total = _add(total, point)
        point = _add(point, point)
        n >>= 1
    z = pow(total[2], _P - 2, _P)
    x, y = total[0] * z % _P, total[1] * z % _P
    return (y | (x & 1) << 255).to_bytes(32, "little")


def ed25519_password(password: bytes, scramble: bytes) -> bytes:
    """What PyMySQL's function of this name returns: the nonce signed by the key the password
    makes."""
    h = hashlib.sha512(password).digest()
    s = int.from_bytes(h[:32], "little") & ~7 & ((1 << 254) - 1) | 1 << 254  # clamped
    r = int.from_bytes(hashlib.sha512(h[32:] + scramble).digest(), "little") % _L
    signed_r, public = _base_times(r), _base_times(s)
    k = int.from_bytes(hashlib.sha512(signed_r + public + scramble).digest(), "little") % _L
    return signed_r + ((k * s + r) % _L).to_bytes(32, "little")


def sha2_rsa_encrypt(password: bytes, salt: bytes, public_key: bytes) -> bytes:
    """What PyMySQL's function of this name returns: the password, NUL-ended and XORed with the
    login's nonce (by PyMySQL's own XOR), encrypted with the server's key."""
    try:
        return oaep_encrypt(_auth._xor_password(password + b"\0", salt), public_key)
    except ValueError as exc:
        raise OperationalError(2061, f"the server's RSA public key for the password can't be "
                                     f"used ({exc}); set mysql.tls.mode so the login is "
                                     f"encrypted by TLS instead") from None


# PyMySQL's functions replaced, the parameters each must have, and whether PyMySQL has its own.
def _has_cryptography() -> bool:
    return bool(getattr(_auth, "_have_cryptography", False))


def _has_nacl() -> bool:
    try:
        import nacl.bindings  # noqa: F401 - PyMySQL's own Ed25519, where installed
    except ImportError:
        return False
    return True


_STEPS = [("sha2_rsa_encrypt", ("password", "salt", "public_key"), sha2_rsa_encrypt,
           lambda: _has_cryptography()),
          ("ed25519_password", ("password", "scramble"), ed25519_password, lambda: _has_nacl())]
# PyMySQL's function used as it is (sha2_rsa_encrypt).
_USED = [("_xor_password", ("password", "salt"))]
_installed: List[Any] = []


def _check(name: str, params: Tuple[str, ...]) -> None:
    code = getattr(getattr(_auth, name, None), "__code__", None)
    if code is None or tuple(code.co_varnames[:code.co_argcount]) != params:
        raise PatchTargetMissing(f"library fix target pymysql._auth.{name} is missing or takes "
                                 f"other parameters: the library changed. Install the tested "
                                 f"PyMySQL (pip install -e . pins it)")


def install() -> None:
    """PyMySQL's login steps, each where it has none of its own; once."""
    if _installed:
        return
    for name, params in _USED:
        _check(name, params)
    for name, params, ours, has_own in _STEPS:
        _check(name, params)
        if not has_own():
            setattr(_auth, name, ours)
    _installed.append(True)
