"""source.logins: a login's password encrypted as MySQL decrypts it, and a nonce signed as
MariaDB's ed25519 checks it, both checked by OpenSSL with keys it made."""
import subprocess

import pytest
from pymysql import _auth
from pymysql.err import OperationalError

from streamer.errors import PatchTargetMissing
from streamer.source import logins


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    d = tmp_path_factory.mktemp("rsa")

    def openssl(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=d)

    openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "key.pem")
    openssl("pkey", "-in", "key.pem", "-pubout", "-out", "spki.pem")  # what MySQL sends
    openssl("rsa", "-in", "key.pem", "-RSAPublicKey_out", "-out", "pkcs1.pem")

    def decrypt(ciphertext):
        (d / "c.bin").write_bytes(ciphertext)
        openssl("pkeyutl", "-decrypt", "-inkey", "key.pem", "-in", "c.bin", "-out", "m.bin",
                "-pkeyopt", "rsa_padding_mode:oaep", "-pkeyopt", "rsa_oaep_md:sha1",
                "-pkeyopt", "rsa_mgf1_md:sha1")
        return (d / "m.bin").read_bytes()

    return {"spki": (d / "spki.pem").read_bytes(), "pkcs1": (d / "pkcs1.pem").read_bytes(),
            "decrypt": decrypt}


@pytest.mark.parametrize("form", ["spki", "pkcs1"])
def test_openssl_decrypts_what_is_encrypted_with_either_form_of_the_key(keys, form):
    for message in (b"", b"x", bytes(range(256))[:214]):  # 214: the most a 2048-bit key takes
        assert keys["decrypt"](logins.oaep_encrypt(message, keys[form])) == message
    # A fresh seed each time: the same message encrypts differently.
    assert logins.oaep_encrypt(b"pw", keys[form]) != logins.oaep_encrypt(b"pw", keys[form])


def test_the_password_is_sent_as_pymysqls_own_encryption_would_send_it(keys):
    salt = bytes(range(1, 21)) + b"never read"  # the server reads the nonce's first 20 bytes
    password = "pässwörd-that-is-longer-than-its-nonce".encode()
    sent = logins.sha2_rsa_encrypt(password, salt, keys["spki"])
    assert keys["decrypt"](sent) == _auth._xor_password(password + b"\0", salt)
    assert len(sent) == 256


def test_a_key_that_cant_be_used_fails_the_login_naming_tls_instead(keys):
    with pytest.raises(OperationalError, match="too long for a 2048-bit RSA key.*mysql.tls.mode"):
        logins.sha2_rsa_encrypt(b"p" * 214, b"s" * 20, keys["spki"])
    for pem, what in ((b"not a key", "not a PEM public key"),
                      (b"-----BEGIN PUBLIC KEY-----\n!!!!\n-----END PUBLIC KEY-----\n", "base64"),
                      (keys["spki"].replace(b"MII", b"MIJ", 1), "DER")):
        with pytest.raises(OperationalError, match=what):
            logins.sha2_rsa_encrypt(b"pw", b"s" * 20, pem)


def test_a_nonce_is_signed_as_openssl_signs_it_with_the_same_secret(tmp_path):
    # Ed25519 signs deterministically: with a 32-byte password, MariaDB's key is the standard's
    # key of that secret, so OpenSSL's signature must be the same bytes.
    def openssl(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=tmp_path)

    # (MariaDB's nonce is 32 bytes; OpenSSL 3.0 signs no empty message.)
    for i, message in enumerate((b"x", bytes(range(32)), b"a nonce of any length " * 5)):
        openssl("genpkey", "-algorithm", "ed25519", "-outform", "DER", "-out", f"k{i}")
        key = (tmp_path / f"k{i}").read_bytes()
        assert key[:16] == bytes.fromhex("302e020100300506032b657004220420")  # RFC 8410
        (tmp_path / f"m{i}").write_bytes(message)
        openssl("pkeyutl", "-sign", "-keyform", "DER", "-inkey", f"k{i}", "-rawin",
                "-in", f"m{i}", "-out", f"s{i}")
        assert logins.ed25519_password(key[16:], message) == (tmp_path / f"s{i}").read_bytes()


def test_install_gives_pymysql_each_step_only_where_it_has_none(monkeypatch):
    # PyMySQL's own steps, as stand-ins of theirs (another test's connection may have installed
    # ours in this process already).
    def own_rsa(password, salt, public_key):
        return b""

    def own_ed25519(password, scramble):
        return b""

    originals = own_rsa, own_ed25519
    monkeypatch.setattr(_auth, "sha2_rsa_encrypt", originals[0])
    monkeypatch.setattr(_auth, "ed25519_password", originals[1])
    for has_cryptography, has_nacl in ((True, True), (False, True), (True, False)):
        monkeypatch.setattr(logins, "_installed", [])
        monkeypatch.setattr(_auth, "_have_cryptography", has_cryptography)
        monkeypatch.setattr(logins, "_has_nacl", lambda: has_nacl)
        logins.install()
        assert (_auth.sha2_rsa_encrypt is logins.sha2_rsa_encrypt) != has_cryptography
        assert (_auth.ed25519_password is logins.ed25519_password) != has_nacl
        monkeypatch.setattr(_auth, "sha2_rsa_encrypt", originals[0])
        monkeypatch.setattr(_auth, "ed25519_password", originals[1])
    # A PyMySQL whose function changed is not patched blindly.
    monkeypatch.setattr(logins, "_installed", [])
    monkeypatch.setattr(_auth, "ed25519_password", lambda password: b"")
    with pytest.raises(PatchTargetMissing, match="pymysql._auth.ed25519_password"):
        logins.install()
