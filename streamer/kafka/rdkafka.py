"""A transactional Kafka producer that calls librdkafka through cffi.

Why not confluent-kafka's Producer: under PyPy every call into a CPython C extension goes through
cpyext, which copies each fresh ``bytes`` argument into a C-level object, while PyPy's JIT calls
cffi functions directly (docs/benchmarks-history.md, "The per-row path after catch-up batching"). cffi
ships with PyPy; CPython takes it from PyPI.

Only what the publisher needs is wrapped, with confluent-kafka's names and its exceptions
(``KafkaException`` carrying a ``KafkaError``, ``BufferError`` for a full queue), so the
publisher's error handling reads the same. AdminClient and Consumer stay confluent-kafka's, on
the same librdkafka file (deploy/librdkafka.sh relinks PyPy's confluent-kafka-pypy to it).

Which librdkafka: the project's copy beside the interpreter (``lib/streamer/librdkafka.so.1``
under ``sys.prefix``, put there by ``make venv`` and by a release build from
deploy/librdkafka.sh: upstream 2.16.0, from confluent-kafka's wheel), else the system's. Debian
12's 2.0.2 spins its main thread for ~1 ms per Kafka transaction (upstream #4684, fixed in
2.4.0). ``STREAMER_LIBRDKAFKA`` names another file, or ``system``.
"""
from __future__ import annotations

import hashlib
import importlib
import logging
import os
import re
import threading
import time
from typing import Any, Dict, Optional, Tuple

from confluent_kafka import KafkaError, KafkaException

from streamer.kafka import logs
from streamer.kafka.bundle import BUNDLED, SYSTEM
from streamer.kafka.sink import Headers

_CDEF = """
typedef struct rd_kafka_s rd_kafka_t;
typedef struct rd_kafka_conf_s rd_kafka_conf_t;
typedef struct rd_kafka_topic_s rd_kafka_topic_t;
typedef struct rd_kafka_error_s rd_kafka_error_t;
typedef struct rd_kafka_queue_s rd_kafka_queue_t;
typedef struct rd_kafka_op_s rd_kafka_event_t;
struct rd_kafka_metadata;
int rd_kafka_version(void);
rd_kafka_conf_t *rd_kafka_conf_new(void);
int rd_kafka_conf_set(rd_kafka_conf_t *conf, const char *name, const char *value,
                      char *errstr, size_t errstr_size);
void rd_kafka_conf_destroy(rd_kafka_conf_t *conf);
void rd_kafka_conf_set_events(rd_kafka_conf_t *conf, int events);
rd_kafka_t *rd_kafka_new(int type, rd_kafka_conf_t *conf, char *errstr, size_t errstr_size);
void rd_kafka_destroy(rd_kafka_t *rk);
rd_kafka_topic_t *rd_kafka_topic_new(rd_kafka_t *rk, const char *topic, void *conf);
void rd_kafka_topic_destroy(rd_kafka_topic_t *rkt);
int rd_kafka_produce(rd_kafka_topic_t *rkt, int32_t partition, int msgflags,
                     const char *payload, size_t len, const char *key, size_t keylen,
                     void *msg_opaque);
typedef struct rd_kafka_headers_s rd_kafka_headers_t;
typedef struct rd_kafka_vu_s {
    int vtype;
    union {
        const char *cstr;
        rd_kafka_topic_t *rkt;
        int i;
        int32_t i32;
        int64_t i64;
        struct { void *ptr; size_t size; } mem;
        struct { const char *name; const void *val; ssize_t size; } header;
        rd_kafka_headers_t *headers;
        void *ptr;
        char _pad[64];
    } u;
} rd_kafka_vu_t;
rd_kafka_error_t *rd_kafka_produceva(rd_kafka_t *rk, const rd_kafka_vu_t *vus, size_t cnt);
int rd_kafka_last_error(void);
const char *rd_kafka_err2str(int err);
int rd_kafka_fatal_error(rd_kafka_t *rk, char *errstr, size_t errstr_size);
rd_kafka_queue_t *rd_kafka_queue_get_main(rd_kafka_t *rk);
void rd_kafka_queue_destroy(rd_kafka_queue_t *rkqu);
size_t rd_kafka_queue_length(rd_kafka_queue_t *rkqu);
rd_kafka_event_t *rd_kafka_queue_poll(rd_kafka_queue_t *rkqu, int timeout_ms);
void rd_kafka_event_destroy(rd_kafka_event_t *rkev);
int rd_kafka_event_type(const rd_kafka_event_t *rkev);
int rd_kafka_event_log(rd_kafka_event_t *rkev, const char **fac, const char **str, int *level);
typedef struct rd_kafka_message_s {
    int err;
    rd_kafka_topic_t *rkt;
    int32_t partition;
    void *payload;
    size_t len;
    void *key;
    size_t key_len;
    int64_t offset;
    void *_private;
} rd_kafka_message_t;
const rd_kafka_message_t *rd_kafka_event_message_next(rd_kafka_event_t *rkev);
const char *rd_kafka_topic_name(const rd_kafka_topic_t *rkt);
int rd_kafka_set_log_queue(rd_kafka_t *rk, rd_kafka_queue_t *rkqu);
int rd_kafka_flush(rd_kafka_t *rk, int timeout_ms);
int rd_kafka_outq_len(rd_kafka_t *rk);
int rd_kafka_metadata(rd_kafka_t *rk, int all_topics, rd_kafka_topic_t *only_rkt,
                      const struct rd_kafka_metadata **metadatap, int timeout_ms);
void rd_kafka_metadata_destroy(const struct rd_kafka_metadata *metadata);
rd_kafka_error_t *rd_kafka_init_transactions(rd_kafka_t *rk, int timeout_ms);
rd_kafka_error_t *rd_kafka_begin_transaction(rd_kafka_t *rk);
rd_kafka_error_t *rd_kafka_commit_transaction(rd_kafka_t *rk, int timeout_ms);
rd_kafka_error_t *rd_kafka_abort_transaction(rd_kafka_t *rk, int timeout_ms);
int rd_kafka_error_code(const rd_kafka_error_t *error);
const char *rd_kafka_error_string(const rd_kafka_error_t *error);
int rd_kafka_error_is_fatal(const rd_kafka_error_t *error);
int rd_kafka_error_is_retriable(const rd_kafka_error_t *error);
int rd_kafka_error_txn_requires_abort(const rd_kafka_error_t *error);
void rd_kafka_error_destroy(rd_kafka_error_t *error);
"""

RD_KAFKA_PRODUCER = 0
PARTITION_UA = -1  # let the partitioner pick by key, as confluent-kafka's produce does
MSG_F_COPY = 2  # librdkafka copies the payload; cffi's pointer lives only during the call
EVENT_DR = 0x1
EVENT_LOG = 0x4
DRAIN_WAIT_S = 0.1  # the drain thread's poll: how long close() may wait for it
ERR_QUEUE_FULL = -184
ERR_FATAL = -150
ERR_INVALID_ARG = -186
ERR_MSG_SIZE_TOO_LARGE = 10  # the broker's MESSAGE_TOO_LARGE: over the topic's max.message.bytes
LOG_ERR = 3  # syslog's level of librdkafka's error lines (its debug lines share facilities)
ERR_PURGED = (-152, -151)  # _PURGE_QUEUE, _PURGE_INFLIGHT: an abort's doing, not Kafka's answer
KEY_SHOWN = 64  # bytes of a refused message's key kept to name it
MIN_VERSION = 0x01060000  # error objects, the transactional API and produceva as used here
# rd_kafka_vtype_t: what each rd_kafka_vu_t of a produceva call holds.
VTYPE_RKT, VTYPE_PARTITION, VTYPE_VALUE, VTYPE_KEY, VTYPE_MSGFLAGS, VTYPE_HEADER = 2, 3, 4, 5, 7, 9
_ERRSTR = 512

PREBUILT = "_rdkafka_ffi"  # streamer/kafka/_rdkafka_ffi.py, written by `make ffi` from _CDEF
NO_SPIN = 0x02040000  # 2.4.0: the main thread no longer polls out waits shorter than 1 ms

log = logging.getLogger(__name__)
_THREAD = re.compile(r"^\[thrd:[^\]]*\]: ")  # a log line's thread tag


def cdef_digest() -> str:
    return hashlib.sha256(_CDEF.encode()).hexdigest()


def generate(path: str) -> None:
    """Write the out-of-line cffi module for _CDEF: its declarations already parsed.

    Parsing _CDEF at import takes cffi's C parser 0.15-0.25 s under PyPy, on every start; the
    generated module loads in ~5 ms. cffi 1.15 (PyPy's) and 2.x write the same file.
    """
    import cffi
    builder = cffi.FFI()
    builder.cdef(_CDEF)
    builder.set_source(f"{__package__}.{PREBUILT}", None)
    builder.emit_python_code(path)
    with open(path, "a") as fh:
        fh.write(f"\nCDEF_SHA256 = {cdef_digest()!r}\n")


def _load_ffi() -> Tuple[Any, str]:
    """The prebuilt ffi when it matches _CDEF, else one parsed now: (ffi, which)."""
    try:
        mod = importlib.import_module(f"{__package__}.{PREBUILT}")
        if getattr(mod, "CDEF_SHA256", None) == cdef_digest():
            return mod.ffi, "prebuilt"
    except Exception:  # noqa: BLE001 - missing, or written for a cffi this one can't load
        pass
    import cffi
    ffi = cffi.FFI()
    ffi.cdef(_CDEF)
    return ffi, "parsed"


_ffi, FFI_SOURCE = _load_ffi()
# Every C type that a call below makes a value of, resolved once, here. cffi parses a type given
# as a string into a buffer its ffi shares, and under PyPy it does so with the GIL released: two
# threads parsing one string for the first time at once can both get a wrong type, which is then
# cached for good. Four threads each making their first "const char **" got "int **" in 1 run of
# 40; in the streamer, both producers' drain threads logging a refused TLS handshake at the same
# moment had every later log event fail. (tests/unit/kafka/test_rdkafka.py keeps it so.)
_ERRSTR_BUF = _ffi.typeof("char[]")
_TEXT_COPY = _ffi.typeof("char[]")  # a NUL-terminated copy of a header's name
_VU_ARRAY = _ffi.typeof("rd_kafka_vu_t[]")
_TEXT_OUT = _ffi.typeof("const char **")
_INT_OUT = _ffi.typeof("int *")
_METADATA_OUT = _ffi.typeof("const struct rd_kafka_metadata **")


def _make_every_type(ffi: Any) -> None:
    """Build every declared type now, while only the importing thread runs: cffi builds each
    one lazily, at its first use, and two threads building one at once can end the process (see
    ``_make_every_function``). A struct's fields are built apart from its name, by sizeof; an
    opaque struct has none to build."""
    typedefs, structs, unions = ffi.list_types()
    names = typedefs + [f"struct {n}" for n in structs] + [f"union {n}" for n in unions]
    for name in names:
        try:
            ffi.sizeof(ffi.typeof(name))
        except ffi.error:  # opaque: its size is librdkafka's own
            pass


def _make_every_function(lib: Any) -> None:
    """Look up every declared function of ``lib`` now, on one thread. An ABI-mode library
    builds a function's C type at the first ``lib.name``; the producer's drain thread and the
    thread calling it make their first calls at the same moment. Under CPython with cffi 2.x,
    two threads building one type at once abort the process: with the GIL, cffi's lock is no
    lock, and a garbage collection started by one of its allocations can run Python code that
    lets the other thread in ("realize_c_type_or_func_lock_held: Assertion ... failed"). That
    killed a standby as it took the lease (tests/unit/kafka/test_rdkafka.py shows it).
    A function the file lacks (an older librdkafka) is left to fail where it is called."""
    for name in dir(lib):
        try:
            getattr(lib, name)
        except AttributeError:
            pass


_make_every_type(_ffi)
_LOADING = threading.Lock()
_lib: Any = None
LIBRARY: Optional[str] = None  # the file loaded, once a producer was made
LIBRARY_VERSION: Optional[str] = None  # and its version, e.g. "2.16.0"


def library_path(setting: Optional[str], bundled: str = BUNDLED) -> str:
    """The file to load: ``STREAMER_LIBRDKAFKA``'s (``system``: the linker's choice), else the
    project's copy when it is there, else the system's."""
    if setting:
        return SYSTEM if setting == "system" else setting
    return bundled if os.path.isfile(bundled) else SYSTEM


def version_text(version: int) -> str:
    return f"{version >> 24}.{(version >> 16) & 0xff}.{(version >> 8) & 0xff}"


def _library() -> Any:
    with _LOADING:
        return _lib if _lib is not None else _load_library()


def _load_library() -> Any:
    global _lib, LIBRARY, LIBRARY_VERSION
    setting = os.environ.get("STREAMER_LIBRDKAFKA")
    path = library_path(setting)
    try:
        lib = _ffi.dlopen(path)
    except OSError as exc:
        fix = (f"set STREAMER_LIBRDKAFKA to a librdkafka.so.1, or unset it (now {setting!r})"
               if setting and setting != "system" else
               "run 'make venv' (development) or install it: apt-get install librdkafka1")
        raise KafkaException(KafkaError(ERR_INVALID_ARG, (
            f"cannot load librdkafka from {path} ({exc}); {fix}"))) from None
    version = lib.rd_kafka_version()
    if version < MIN_VERSION:
        raise KafkaException(KafkaError(ERR_INVALID_ARG, (
            f"librdkafka {version_text(version)} ({path}) is too old; 1.6 or newer is needed")))
    if path == SYSTEM and version < NO_SPIN:
        log.warning("librdkafka %s (the system's) spins a core for ~1 ms per Kafka "
                    "transaction; a release build (or 'make venv') installs a current one "
                    "as %s (deploy/librdkafka.sh), or install librdkafka 2.4 or newer",
                    version_text(version), BUNDLED)
    else:
        log.info("librdkafka %s from %s", version_text(version), path)
    _make_every_function(lib)
    _lib, LIBRARY, LIBRARY_VERSION = lib, path, version_text(version)
    return _lib


class Refused:
    """A message Kafka refused, and how many it refused: the largest of those refused as too
    large (MESSAGE_TOO_LARGE: over the topic's ``max.message.bytes``), or the first of the
    others. Only a delivery report says which topic and row, and why: the transaction's own
    error names none of them once it has failed (later calls say "Erroneous state")."""

    def __init__(self, topic: str, size: int, key: Optional[bytes], key_len: int,
                 count: int, err: int = ERR_MSG_SIZE_TOO_LARGE, reason: str = "") -> None:
        self.topic = topic
        self.size = size  # value and key
        self.key = key  # its first KEY_SHOWN bytes; None for a keyless message
        self.key_len = key_len
        self.count = count  # refused messages seen, of any topic
        self.err = err
        self.reason = reason  # librdkafka's text for err


def _text(ptr: Any) -> str:
    return _ffi.string(ptr).decode("utf-8", "replace") if ptr != _ffi.NULL else ""


def _conf_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _ms(timeout_s: float) -> int:
    return max(0, int(timeout_s * 1000))


class Producer:
    """The subset of confluent_kafka.Producer the publisher uses. ``close()`` ends it.

    Delivery reports are events, and only for failed messages: no delivery callback into Python,
    and a transaction's outcome, not each message's, is what the publisher acts on. The mode
    matters for waiting. Without one, librdkafka 2.0's flush, which ``commit_transaction`` runs
    first, polls an empty queue in 10 ms slices, so it returns up to 10 ms after the last message
    was acknowledged (a small batch's commit: median ~22 ms, against ~7 ms in event mode). In
    event mode it waits on a condition that the last acknowledgement signals. A failed message
    counts as outstanding until its event is destroyed, so a thread does that as they come
    (otherwise the commit would wait out its whole timeout, and report that, not the failure).
    """

    def __init__(self, conf: Dict[str, Any]):
        lib = _library()
        self._lib = lib
        errstr = _ffi.new(_ERRSTR_BUF, _ERRSTR)
        rconf = lib.rd_kafka_conf_new()
        # log.queue: librdkafka's log lines become events on the main queue, which the drain
        # thread serves (kafka.logs), instead of lines its own threads write to stderr.
        conf = dict(conf, **{"delivery.report.only.error": True, "log.queue": True})
        for key, value in conf.items():
            if lib.rd_kafka_conf_set(rconf, str(key).encode(), _conf_value(value).encode(),
                                     errstr, _ERRSTR) != 0:
                lib.rd_kafka_conf_destroy(rconf)
                # librdkafka may name an alias ("compression.codec"): say which key was given.
                raise KafkaException(KafkaError(ERR_INVALID_ARG, f"{key}: {_text(errstr)}"))
        lib.rd_kafka_conf_set_events(rconf, EVENT_DR | EVENT_LOG)
        rk = lib.rd_kafka_new(RD_KAFKA_PRODUCER, rconf, errstr, _ERRSTR)
        if rk == _ffi.NULL:
            lib.rd_kafka_conf_destroy(rconf)  # rd_kafka_new owns the conf only on success
            raise KafkaException(KafkaError(ERR_INVALID_ARG, _text(errstr)))
        lib.rd_kafka_set_log_queue(rk, _ffi.NULL)  # NULL: the main queue
        self._rk = rk
        self._events = lib.rd_kafka_queue_get_main(rk)
        self._closing = False
        # Set by the drain thread, read (and cleared) by the publisher when a transaction fails.
        self.too_large: Optional[Refused] = None
        self.refused: Optional[Refused] = None  # the first failure of any other kind
        # Why the open transaction failed (librdkafka's TXNERR line): the calls after it say
        # only "Erroneous state", and a refusal outside a delivery (an ACL refusing a topic
        # its partitions) has no report.
        self.txn_failure: Optional[str] = None
        self.partition_failure: Optional[str] = None  # a partition it could not be given
        self._drainer = threading.Thread(target=self._drain, name="rdkafka-failures", daemon=True)
        self._drainer.start()
        self._topics: Dict[str, Any] = {}

    def close(self) -> None:
        """Destroy the handle; messages still queued are dropped (flush first to keep them)."""
        rk, self._rk = self._rk, None
        if rk is None:
            return
        self._closing = True
        self._drainer.join()
        for rkt in self._topics.values():
            self._lib.rd_kafka_topic_destroy(rkt)
        self._topics.clear()
        self.poll(0)
        self._lib.rd_kafka_queue_destroy(self._events)
        self._lib.rd_kafka_destroy(rk)

    def _drain(self) -> None:
        while not self._closing:
            self.poll(DRAIN_WAIT_S)  # cffi releases the GIL while librdkafka waits

    def _topic(self, topic: str) -> Any:
        rkt = self._topics.get(topic)
        if rkt is None:
            rkt = self._lib.rd_kafka_topic_new(self._rk, topic.encode(), _ffi.NULL)
            if rkt == _ffi.NULL:
                self._fail(self._lib.rd_kafka_last_error())
            self._topics[topic] = rkt
        return rkt

    # -- messages -------------------------------------------------------------------------------
    def produce(self, topic: str, value: Optional[bytes], key: Optional[bytes] = None,
                headers: Optional[Headers] = None) -> None:
        rkt = self._topics.get(topic)
        if rkt is None:
            rkt = self._topic(topic)
        if headers is not None:
            self._produce_with(rkt, PARTITION_UA, value, key, headers)
        elif self._lib.rd_kafka_produce(
                rkt, PARTITION_UA, MSG_F_COPY,
                _ffi.NULL if value is None else value, 0 if value is None else len(value),
                _ffi.NULL if key is None else key, 0 if key is None else len(key),
                _ffi.NULL) != 0:
            err = self._lib.rd_kafka_last_error()
            if err == ERR_QUEUE_FULL:
                raise BufferError("librdkafka's producer queue is full")
            self._fail(err)

    def produce_to(self, topic: str, partition: int, value: Optional[bytes],
                   key: Optional[bytes] = None, headers: Optional[Headers] = None) -> None:
        """produce() to one partition, chosen by the caller (a TRUNCATE goes to each)."""
        if headers is not None:
            self._produce_with(self._topic(topic), partition, value, key, headers)
        elif self._lib.rd_kafka_produce(
                self._topic(topic), partition, MSG_F_COPY,
                _ffi.NULL if value is None else value, 0 if value is None else len(value),
                _ffi.NULL if key is None else key, 0 if key is None else len(key),
                _ffi.NULL) != 0:
            err = self._lib.rd_kafka_last_error()
            if err == ERR_QUEUE_FULL:
                raise BufferError("librdkafka's producer queue is full")
            self._fail(err)

    def _produce_with(self, rkt: Any, partition: int, value: Optional[bytes],
                      key: Optional[bytes], headers: Headers) -> None:
        """A message with Kafka headers, through rd_kafka_produceva (rd_kafka_produce has no
        headers): one rd_kafka_vu_t per field and per header. librdkafka copies them all."""
        vus = _ffi.new(_VU_ARRAY, 5 + len(headers))
        vus[0].vtype, vus[0].u.rkt = VTYPE_RKT, rkt
        vus[1].vtype, vus[1].u.i32 = VTYPE_PARTITION, partition
        vus[2].vtype, vus[2].u.i = VTYPE_MSGFLAGS, MSG_F_COPY
        keep = []  # the buffers must outlive the call
        for at, vtype, data in ((3, VTYPE_VALUE, value), (4, VTYPE_KEY, key)):
            vus[at].vtype = vtype
            if data is not None:
                buf = _ffi.from_buffer(data)
                keep.append(buf)
                vus[at].u.mem.ptr, vus[at].u.mem.size = buf, len(data)
        for at, (name, data) in enumerate(headers, 5):
            cname, cval = _ffi.new(_TEXT_COPY, name.encode()), _ffi.from_buffer(data)
            keep += (cname, cval)
            vus[at].vtype = VTYPE_HEADER
            vus[at].u.header.name, vus[at].u.header.val = cname, cval
            vus[at].u.header.size = len(data)
        error = self._lib.rd_kafka_produceva(self._rk, vus, len(vus))
        if error == _ffi.NULL:
            return
        code = self._lib.rd_kafka_error_code(error)
        self._lib.rd_kafka_error_destroy(error)
        if code == ERR_QUEUE_FULL:
            raise BufferError("librdkafka's producer queue is full")
        self._fail(code)

    def _fail(self, err: int) -> None:
        if err == ERR_FATAL:
            # The code of the error that made the producer fatal says what happened (fenced...).
            errstr = _ffi.new(_ERRSTR_BUF, _ERRSTR)
            code = self._lib.rd_kafka_fatal_error(self._rk, errstr, _ERRSTR)
            raise KafkaException(KafkaError(code, _text(errstr), fatal=True))
        raise KafkaException(KafkaError(err, _text(self._lib.rd_kafka_err2str(err))))

    def poll(self, timeout: float = 0.0) -> int:
        """Wait up to ``timeout`` for delivery failures and discard them, and log librdkafka's
        log lines (kafka.logs); returns how many events were served.

        The drain thread does this too. (rd_kafka_poll must not serve these events: with no
        delivery callback set, it would call one.)
        """
        lib = self._lib
        n = 0
        ev = lib.rd_kafka_queue_poll(self._events, _ms(timeout))
        while ev != _ffi.NULL:
            kind = lib.rd_kafka_event_type(ev)
            if kind == EVENT_LOG:
                self._log(ev)
            elif kind == EVENT_DR:
                self._failed(ev)
            lib.rd_kafka_event_destroy(ev)
            n += 1
            ev = lib.rd_kafka_queue_poll(self._events, 0)
        return n

    def forget_failures(self) -> None:
        """What the last transaction's failures noted (a new one's are its own)."""
        self.too_large = self.refused = None
        self.txn_failure = self.partition_failure = None

    def _failed(self, ev: Any) -> None:
        """Keep the largest of the failed messages Kafka refused as too large (``too_large``)
        and the first that failed otherwise (``refused``), for the publisher to name; the
        messages an abort purged are no failure of theirs."""
        lib = self._lib
        msg = lib.rd_kafka_event_message_next(ev)
        while msg != _ffi.NULL:
            err = int(msg.err)
            if err == ERR_MSG_SIZE_TOO_LARGE:
                seen = self.too_large
                if seen is None or int(msg.len) + int(msg.key_len) > seen.size:
                    self.too_large = self._refused(msg, err, seen)
                else:
                    seen.count += 1
            elif err not in ERR_PURGED:
                seen = self.refused
                # The first, unless a keyless one of the same refusal comes: it names the cause
                # (a compacted topic refuses a whole batch for one keyless record).
                if seen is None or (err == seen.err and seen.key is not None
                                    and msg.key == _ffi.NULL):
                    self.refused = self._refused(msg, err, seen)
                else:
                    seen.count += 1
            msg = lib.rd_kafka_event_message_next(ev)

    def _refused(self, msg: Any, err: int, seen: Optional[Refused]) -> Refused:
        key = None if msg.key == _ffi.NULL else \
            bytes(_ffi.buffer(msg.key, min(int(msg.key_len), KEY_SHOWN)))
        return Refused(_text(self._lib.rd_kafka_topic_name(msg.rkt)),
                       int(msg.len) + int(msg.key_len), key, int(msg.key_len),
                       1 + (seen.count if seen else 0), err,
                       _text(self._lib.rd_kafka_err2str(err)))

    def _log(self, ev: Any) -> None:
        fac = _ffi.new(_TEXT_OUT)
        text = _ffi.new(_TEXT_OUT)
        level = _ffi.new(_INT_OUT)
        if self._lib.rd_kafka_event_log(ev, fac, text, level) == 0:
            facility, line = _text(fac[0]), _text(text[0])
            if level[0] <= LOG_ERR:
                if facility == "TXNERR":
                    self.txn_failure = _THREAD.sub("", line, 1)
                elif facility == "ADDPARTS":  # it names the topic; TXNERR only the broker
                    self.partition_failure = _THREAD.sub("", line, 1)
            logs.emit(level[0], facility, line)

    def flush(self, timeout: float = 60.0) -> int:
        """Wait until every message is acknowledged or its failure discarded; returns how many
        are still outstanding (0 once librdkafka's own wait succeeded)."""
        if self._lib.rd_kafka_flush(self._rk, _ms(timeout)) == 0:
            return 0
        return max(1, len(self))

    def __len__(self) -> int:
        """Messages not yet acknowledged, or failed with their event not yet discarded.

        rd_kafka_outq_len also counts every op on the main queue, and a broker's connection
        failure puts an error op there as well as logging it. Only the drain thread sees those
        ops, so they are taken off: they are not messages.
        """
        lib = self._lib
        return max(0, int(lib.rd_kafka_outq_len(self._rk)) - int(lib.rd_kafka_queue_length(self._events)))

    def list_topics(self, topic: str, timeout: float = 10.0) -> None:
        """Fetch ``topic``'s metadata into the producer (the result itself is not needed)."""
        md = _ffi.new(_METADATA_OUT)
        err = self._lib.rd_kafka_metadata(self._rk, 0, self._topic(topic), md, _ms(timeout))
        if err != 0:
            raise KafkaException(KafkaError(err, _text(self._lib.rd_kafka_err2str(err))))
        self._lib.rd_kafka_metadata_destroy(md[0])

    # -- transactions ---------------------------------------------------------------------------
    def init_transactions(self, timeout: float) -> None:
        """librdkafka's init_transactions, once the producer has the cluster's brokers.

        A new producer connects to its bootstrap broker and asks for the cluster's metadata;
        when the answer comes, librdkafka (2.16) retires the bootstrap broker for the ones it
        names, and the new ones connect when something asks for them. An init_transactions
        whose search for the transaction coordinator began on the bootstrap broker in between
        finds no broker to ask, and waits for librdkafka's coordinator query timer: 500 ms.
        That was one init in seven in a bare loop on the local Kafka, and one streamer start in
        eight half a second slower (docs/benchmarks.md, "A producer's first half second"). Asking
        for the brokers first (a metadata request for no topic, ~1 ms) lets the search begin
        where it can go on. Its failure is left to init_transactions to report: both wait
        within ``timeout``, together."""
        deadline = time.monotonic() + timeout
        md = _ffi.new(_METADATA_OUT)
        if self._lib.rd_kafka_metadata(self._rk, 0, _ffi.NULL, md, _ms(timeout)) == 0:
            self._lib.rd_kafka_metadata_destroy(md[0])
        left = max(deadline - time.monotonic(), 0.001)
        self._check(self._lib.rd_kafka_init_transactions(self._rk, _ms(left)))

    def begin_transaction(self) -> None:
        self._check(self._lib.rd_kafka_begin_transaction(self._rk))

    def commit_transaction(self, timeout: float) -> None:
        self._check(self._lib.rd_kafka_commit_transaction(self._rk, _ms(timeout)))

    def abort_transaction(self, timeout: float) -> None:
        self._check(self._lib.rd_kafka_abort_transaction(self._rk, _ms(timeout)))

    def _check(self, error: Any) -> None:
        if error == _ffi.NULL:
            return
        lib = self._lib
        try:
            kerr = KafkaError(lib.rd_kafka_error_code(error), _text(lib.rd_kafka_error_string(error)),
                              fatal=bool(lib.rd_kafka_error_is_fatal(error)),
                              retriable=bool(lib.rd_kafka_error_is_retriable(error)),
                              txn_requires_abort=bool(lib.rd_kafka_error_txn_requires_abort(error)))
        finally:
            lib.rd_kafka_error_destroy(error)
        raise KafkaException(kerr)
