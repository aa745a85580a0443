"""source.rsa: a login's password encrypted as MySQL decrypts it, checked by OpenSSL's own
RSA-OAEP decryption with a key it made."""
import subprocess

import pytest
from pymysql import _auth
from pymysql.err import OperationalError

from streamer.errors import PatchTargetMissing
from streamer.source import rsa


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
        assert keys["decrypt"](rsa.oaep_encrypt(message, keys[form])) == message
    # A fresh seed each time: the same message encrypts differently.
    assert rsa.oaep_encrypt(b"pw", keys[form]) != rsa.oaep_encrypt(b"pw", keys[form])


def test_the_password_is_sent_as_pymysqls_own_encryption_would_send_it(keys):
    salt = bytes(range(1, 21)) + b"never read"  # the server reads the nonce's first 20 bytes
    password = "pässwörd-that-is-longer-than-its-nonce".encode()
    sent = rsa.sha2_rsa_encrypt(password, salt, keys["spki"])
    assert keys["decrypt"](sent) == _auth._xor_password(password + b"\0", salt)
    assert len(sent) == 256


def test_a_key_that_cant_be_used_fails_the_login_naming_tls_instead(keys):
    with pytest.raises(OperationalError, match="too long for a 2048-bit RSA key.*mysql.tls.mode"):
        rsa.sha2_rsa_encrypt(b"p" * 214, b"s" * 20, keys["spki"])
    for pem, what in ((b"not a key", "not a PEM public key"),
                      (b"-----BEGIN PUBLIC KEY-----\n!!!!\n-----END PUBLIC KEY-----\n", "base64"),
                      (keys["spki"].replace(b"MII", b"MIJ", 1), "DER")):
        with pytest.raises(OperationalError, match=what):
            rsa.sha2_rsa_encrypt(b"pw", b"s" * 20, pem)


def test_install_gives_pymysql_the_rsa_step_only_where_it_has_none(monkeypatch):
    original = _auth.sha2_rsa_encrypt
    monkeypatch.setattr(rsa, "_installed", [])
    monkeypatch.setattr(_auth, "sha2_rsa_encrypt", original)
    monkeypatch.setattr(_auth, "_have_cryptography", True)
    rsa.install()
    assert _auth.sha2_rsa_encrypt is original
    monkeypatch.setattr(_auth, "_have_cryptography", False)
    rsa.install()
    assert _auth.sha2_rsa_encrypt is rsa.sha2_rsa_encrypt
    # A PyMySQL whose function changed is not patched blindly.
    monkeypatch.setattr(rsa, "_installed", [])
    monkeypatch.setattr(_auth, "sha2_rsa_encrypt", lambda password, salt: b"")
    with pytest.raises(PatchTargetMissing, match="pymysql._auth.sha2_rsa_encrypt"):
        rsa.install()
