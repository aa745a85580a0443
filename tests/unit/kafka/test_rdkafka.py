"""The cffi producer's edges that need no broker: config errors, the full-queue signal, the ffi."""
import ast
import hashlib
import json
import os
import subprocess
import sys
import time

import pytest
from confluent_kafka import KafkaException

from streamer.kafka import bundle, rdkafka

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

# Nothing listens here: the producer only tries to connect in the background.
NOWHERE = "127.0.0.1:1"


def test_config_values_are_passed_the_way_librdkafka_spells_them():
    assert rdkafka._conf_value(True) == "true"
    assert rdkafka._conf_value(False) == "false"
    assert rdkafka._conf_value(5) == "5"
    assert rdkafka._conf_value("lz4") == "lz4"


def test_an_unknown_setting_is_refused_with_its_name():
    with pytest.raises(KafkaException, match="lingr.ms"):
        rdkafka.Producer({"bootstrap.servers": NOWHERE, "lingr.ms": 5})


def test_a_bad_value_is_refused_with_the_setting_named():
    with pytest.raises(KafkaException, match="compression.type"):
        rdkafka.Producer({"bootstrap.servers": NOWHERE, "compression.type": "zip"})


def test_a_full_queue_raises_buffer_error():
    p = rdkafka.Producer({"bootstrap.servers": NOWHERE, "queue.buffering.max.messages": 2})
    try:
        p.produce("t", b"v1", b"k")
        p.produce("t", b"v2", None)
        with pytest.raises(BufferError):
            p.produce("t", b"v3", b"k")
    finally:
        p.close()
    p.close()  # a second close is harmless


def test_a_failed_message_does_not_stay_outstanding_and_close_stops_the_drain_thread():
    # A failed message counts as outstanding until its delivery event is destroyed; without the
    # drain thread, this flush would wait its whole 20 s and leave the message counted.
    p = rdkafka.Producer({"bootstrap.servers": NOWHERE, "message.timeout.ms": 200})
    try:
        p.produce("t", b"v", b"k")
        assert p.flush(20) == 0
    finally:
        p.close()
    assert not p._drainer.is_alive()


def test_a_failed_message_is_kept_to_name_its_topic_key_and_reason_a_keyless_one_first():
    # Two messages time out (nothing listens): the one kept is the keyless one, which names a
    # compacted topic's refusal of a whole batch; both are counted.
    p = rdkafka.Producer({"bootstrap.servers": NOWHERE, "message.timeout.ms": 200})
    try:
        p.produce("t", b"value", b"k")
        p.produce("u", b"v", None)
        assert p.flush(20) == 0
    finally:
        p.close()
    assert p.too_large is None and p.refused is not None
    got = p.refused
    assert (got.topic, got.key, got.key_len, got.size, got.count) == ("u", None, 0, 1, 2)
    assert got.err == -192 and got.reason == "Local: Message timed out"


class LogEvents:
    """rd_kafka_event_log of a librdkafka that logged ``lines`` ((facility, syslog level, text)
    each)."""

    def __init__(self, lines):
        self.lines = lines
        self.kept = []

    def rd_kafka_event_log(self, ev, fac, text, level):
        facility, syslog_level, line = self.lines[ev]
        self.kept += [rdkafka._ffi.new("char[]", facility.encode()),
                      rdkafka._ffi.new("char[]", line.encode())]
        fac[0], text[0], level[0] = self.kept[-2], self.kept[-1], syslog_level
        return 0


def test_why_a_transaction_failed_is_kept_from_librdkafka_s_error_lines_without_thread_tags():
    p = rdkafka.Producer.__new__(rdkafka.Producer)
    p.txn_failure = p.partition_failure = None
    p._lib = LogEvents([
        ("ADDPARTS", 3, "[thrd:127.0.0.1:9092/1]: Failed to add partition \"ns.db.t\" [0] to "
                        "transaction: Broker: Topic authorization failed"),
        ("TXNERR", 3, "[thrd:127.0.0.1:9092/1]: Current transaction failed in state "
                      "InTransaction: Failed to add partition(s) to transaction on broker 1: "
                      "Broker: Topic authorization failed (TOPIC_AUTHORIZATION_FAILED)"),
        # Debug lines of the same facilities (debug=eos) leave them.
        ("TXNERR", 7, "[thrd:main]: Ignoring sub-sequent abortable transaction error"),
        ("ADDPARTS", 7, "[thrd:main]: AddPartitionsToTxn response: partition ...")])
    for ev in range(4):
        p._log(ev)
    assert p.txn_failure == ("Current transaction failed in state InTransaction: Failed to add "
                             "partition(s) to transaction on broker 1: Broker: Topic "
                             "authorization failed (TOPIC_AUTHORIZATION_FAILED)")
    assert p.partition_failure == ('Failed to add partition "ns.db.t" [0] to transaction: '
                                   'Broker: Topic authorization failed')
    p.too_large = p.refused = object()
    p.forget_failures()
    assert (p.too_large, p.refused, p.txn_failure, p.partition_failure) == (None,) * 4


def test_a_broker_error_on_the_event_queue_is_not_counted_as_a_message():
    # A refused connection puts an error op on the main queue, which rd_kafka_outq_len counts.
    # CI once saw flush() report that op as a message still queued.
    p = rdkafka.Producer({"bootstrap.servers": NOWHERE})
    try:
        p._closing = True
        p._drainer.join()  # keep the ops where librdkafka puts them
        deadline = time.monotonic() + 30
        while p._lib.rd_kafka_queue_length(p._events) == 0:
            assert time.monotonic() < deadline, "no connection error reached the event queue"
            time.sleep(0.02)
        assert len(p) == 0
        p.produce("t", b"v", b"k")
        assert len(p) == 1
    finally:
        p.close()


def test_a_transactional_call_that_times_out_raises_a_retriable_kafka_error():
    p = rdkafka.Producer({"bootstrap.servers": NOWHERE, "transactional.id": "unit-nowhere"})
    try:
        began = time.monotonic()
        with pytest.raises(KafkaException) as caught:
            p.init_transactions(2.0)
        # The brokers' metadata is asked for first, within the same timeout: ~2 s in all, where
        # each waiting its own would take 4.
        assert time.monotonic() - began < 3.5
        err = caught.value.args[0]
        assert err.name() == "_TIMED_OUT"
        assert err.retriable() and not err.fatal()
    finally:
        p.close()


def test_no_c_type_is_parsed_from_a_string_after_import():
    # cffi parses a type string with PyPy's GIL released, into a buffer the ffi shares: threads
    # parsing at once can get a wrong type (rdkafka's module constants say more). Only the
    # module's own top level, which runs once on import, may name a type by a string.
    with open(rdkafka.__file__.replace(".pyc", ".py")) as fh:
        tree = ast.parse(fh.read())
    parsed_late = []
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for call in ast.walk(fn):
                if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                        and call.func.attr in ("new", "cast", "typeof", "sizeof", "offsetof")
                        and call.args and isinstance(call.args[0], ast.Constant)
                        and isinstance(call.args[0].value, str)):
                    parsed_late.append(f"{fn.name}: {call.func.attr}({call.args[0].value!r})")
    assert parsed_late == []
    assert rdkafka._ffi.getctype(rdkafka._TEXT_OUT) == "char * *"
    assert rdkafka._ffi.getctype(rdkafka._INT_OUT) == "int *"


# Threads making their first calls through a fresh ffi at once, with a garbage collection (which
# any allocation of cffi's may start) letting another thread in: what the producer's drain thread
# and its caller do at a standby's takeover. Each round execs the prebuilt module again for an ffi
# whose types are all still unbuilt.
_FIRST_CALLS = """
import gc, sys, threading, time
from streamer.kafka import rdkafka
rounds, made_first = int(sys.argv[1]), sys.argv[2] == "made"
rdkafka._library()
with open(sys.argv[3]) as fh:
    code = compile(fh.read(), sys.argv[3], "exec")
sys.setswitchinterval(1e-6)
gc.callbacks.append(lambda phase, info: time.sleep(0) if phase == "start" else None)
gc.set_threshold(1, 1000, 1000)
for _ in range(rounds):
    ns = {}
    exec(code, ns)
    ffi = ns["ffi"]
    if made_first:
        rdkafka._make_every_type(ffi)
    lib = ffi.dlopen(rdkafka.LIBRARY)
    if made_first:
        rdkafka._make_every_function(lib)
    names = dir(lib)
    start = threading.Barrier(8)
    def first_calls():
        start.wait()
        for name in names:
            getattr(lib, name)
        ffi.new(rdkafka._VU_ARRAY, 2)
    threads = [threading.Thread(target=first_calls) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
print("rounds", rounds)
"""


@pytest.mark.skipif(sys.implementation.name != "cpython",
                    reason="the race is provoked through gc.callbacks, which PyPy lacks")
def test_threads_making_their_first_calls_at_once_find_every_c_type_made():
    # cffi 2.x under CPython builds a C type at its first use with no lock (the GIL is taken as
    # one) and aborts the process when another thread built the same type meanwhile. A standby
    # died so taking the lease. Without the library's types and functions made first ("unmade"
    # for "made" below), this run aborted 5 times in 5 (cffi 2.1.1).
    prebuilt = os.path.join(os.path.dirname(rdkafka.__file__), rdkafka.PREBUILT + ".py")
    done = subprocess.run([sys.executable, "-c", _FIRST_CALLS, "25", "made", prebuilt],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["rounds", "25"]


def test_the_prebuilt_declarations_are_current_and_used(tmp_path):
    fresh = tmp_path / "ffi.py"
    rdkafka.generate(str(fresh))
    with open(os.path.join(os.path.dirname(rdkafka.__file__), rdkafka.PREBUILT + ".py")) as fh:
        committed = fh.read()
    assert committed == fresh.read_text(), "streamer/kafka/_rdkafka_ffi.py is stale: run `make ffi`"
    assert rdkafka.FFI_SOURCE == "prebuilt"


def test_stale_prebuilt_declarations_are_parsed_instead(monkeypatch):
    monkeypatch.setattr(rdkafka, "_CDEF", rdkafka._CDEF + "int rd_kafka_brokers_add(void *, const char *);\n")
    ffi, source = rdkafka._load_ffi()
    assert source == "parsed"
    lib = ffi.dlopen("librdkafka.so.1")
    assert lib.rd_kafka_version() >= rdkafka.MIN_VERSION and hasattr(lib, "rd_kafka_brokers_add")


def test_the_project_s_build_is_loaded_when_it_is_there_else_the_system_s(tmp_path):
    bundled = tmp_path / "librdkafka.so.1"
    assert rdkafka.library_path(None, str(bundled)) == rdkafka.SYSTEM
    bundled.write_bytes(b"")
    assert rdkafka.library_path(None, str(bundled)) == str(bundled)
    # STREAMER_LIBRDKAFKA wins: another file, or the system's by name.
    assert rdkafka.library_path("/opt/other/librdkafka.so.1", str(bundled)) == "/opt/other/librdkafka.so.1"
    assert rdkafka.library_path("system", str(bundled)) == rdkafka.SYSTEM


def test_make_venv_installs_upstream_s_current_library_where_the_loader_looks():
    assert rdkafka.BUNDLED == os.path.join(sys.prefix, bundle.BUNDLED_RELPATH)
    assert os.path.isfile(rdkafka.BUNDLED), "run 'make venv': it runs deploy/librdkafka.sh"
    assert _features(rdkafka.BUNDLED)[0] >> 8 == 0x021000  # 2.16.0, whatever its pre-release byte


def test_confluent_kafka_s_consumer_runs_on_the_same_librdkafka_as_the_producer():
    # PyPy: confluent-kafka-pypy relinked to the project's copy (deploy/librdkafka.sh
    # --relink-consumer); CPython: confluent-kafka's wheel carries the very same file.
    code = ("import confluent_kafka, hashlib, json\n"
            "from streamer.kafka import rdkafka\n"
            "c = confluent_kafka.Consumer({'bootstrap.servers': '127.0.0.1:1', 'group.id': 'g'})\n"
            "p = rdkafka.Producer({'bootstrap.servers': '127.0.0.1:1'})\n"
            "maps = {l.split()[-1] for l in open('/proc/self/maps') if 'librdkafka' in l}\n"
            "print(confluent_kafka.libversion()[0], rdkafka.LIBRARY_VERSION)\n"
            "print(json.dumps(sorted(hashlib.sha256(open(m, 'rb').read()).hexdigest() for m in maps)))\n"
            "p.close(); c.close()\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    versions, digests = done.stdout.splitlines()
    assert versions == "2.16.0 2.16.0"
    with open(rdkafka.BUNDLED, "rb") as fh:
        bundled = hashlib.sha256(fh.read()).hexdigest()
    assert set(json.loads(digests)) == {bundled}  # every librdkafka mapped is the project's file


def _producer_log(setting: str) -> subprocess.CompletedProcess:
    code = ("import logging; logging.basicConfig(level=logging.INFO, format='%(levelname)s %(name)s %(message)s')\n"
            "from streamer.kafka import rdkafka\n"
            f"p = rdkafka.Producer({{'bootstrap.servers': '{NOWHERE}'}}); print(rdkafka.LIBRARY); p.close()\n"
            "print(rdkafka.LIBRARY in {l.split()[-1] for l in open('/proc/self/maps')})\n")
    env = dict(os.environ, STREAMER_LIBRDKAFKA=setting) if setting else \
        {k: v for k, v in os.environ.items() if k != "STREAMER_LIBRDKAFKA"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=60)


def test_a_producer_runs_on_the_project_s_build_and_says_so():
    done = _producer_log("")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [rdkafka.BUNDLED, "True"]  # mapped into the process
    assert f"INFO streamer.kafka.rdkafka librdkafka 2.16.0 from {rdkafka.BUNDLED}" in done.stderr
    assert "WARNING streamer.kafka.rdkafka" not in done.stderr
    # The broker that isn't there: librdkafka's own line, through logging, never raw.
    assert "WARNING streamer.kafka.librdkafka FAIL: " in done.stderr
    assert not [ln for ln in done.stderr.splitlines() if ln.startswith("%")]


def test_the_system_s_2_0_library_is_used_when_asked_with_a_warning_naming_the_spin_and_the_fix():
    done = _producer_log("system")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == rdkafka.SYSTEM
    warning = [ln for ln in done.stderr.splitlines()
               if ln.startswith("WARNING streamer.kafka.rdkafka ")]
    assert len(warning) == 1 and "2.0.2 (the system's) spins a core for ~1 ms per Kafka transaction" in warning[0]
    assert rdkafka.BUNDLED in warning[0] and "2.4 or newer" in warning[0]


def _features(path: str):
    """librdkafka's version and built-in features, read in a fresh process: in this one, a copy
    already loaded under the name librdkafka.so.1 would answer for the system's."""
    code = ("import cffi, json, sys\n"
            "ffi = cffi.FFI()\n"
            "ffi.cdef('void *rd_kafka_conf_new(void); void rd_kafka_conf_destroy(void *conf);"
            "int rd_kafka_conf_get(const void *conf, const char *name, char *dest, size_t *size);"
            "int rd_kafka_version(void);')\n"
            "lib = ffi.dlopen(sys.argv[1])\n"
            "conf, size, dest = lib.rd_kafka_conf_new(), ffi.new('size_t *', 512), ffi.new('char[]', 512)\n"
            "assert lib.rd_kafka_conf_get(conf, b'builtin.features', dest, size) == 0\n"
            "lib.rd_kafka_conf_destroy(conf)\n"
            "print(json.dumps([lib.rd_kafka_version(), ffi.string(dest).decode().split(',')]))\n")
    done = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True,
                          check=True, timeout=60)
    version, features = json.loads(done.stdout)
    return version, set(features)


def test_the_project_s_library_has_every_feature_of_the_system_s_but_kerberos():
    # SSL, SASL and the codecs: a site's Kafka settings that work with Debian's build work with
    # the project's, except GSSAPI, which upstream's build lacks and the config refuses.
    system_version, system = _features(rdkafka.SYSTEM)
    bundled_version, bundled = _features(rdkafka.BUNDLED)
    assert bundled_version > system_version
    assert {"ssl", "sasl_plain", "sasl_scram", "sasl_oauthbearer", "zstd", "lz4"} <= bundled
    assert system - bundled == {"sasl_gssapi"}



def test_a_librdkafka_that_is_not_there_is_refused_naming_the_setting_that_chose_it(tmp_path):
    done = _producer_log(str(tmp_path / "missing.so"))
    assert done.returncode != 0
    assert f"cannot load librdkafka from {tmp_path / 'missing.so'}" in done.stderr
    assert "STREAMER_LIBRDKAFKA" in done.stderr
