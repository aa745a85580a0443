"""One error model: every error of the streamer's own ends a command with its exit code and one
line on stderr, never a traceback."""
import inspect
import weakref

import pytest
from confluent_kafka import KafkaError, KafkaException

from streamer import cli, errors
from streamer.schema.versions import TableVersion
from tests.unit.schema.test_tables import Col, TableMap

BY_CODE = [
    (errors.ConfigError("config key 'mysql.port': 'x' is not 1..65535"), 2, "config error"),
    (errors.SourceError("binlog_format is MIXED, must be ROW"), 3, "error"),
    (errors.PurgedBinlog("binlog file mysql-bin.000001 is no longer on the server"), 3, "error"),
    (errors.MissingColumnNames("set binlog_row_metadata=FULL"), 3, "error"),
    (errors.SnapshotRefused("table db.t has no primary key"), 3, "error"),
    (errors.RefusedRow("Kafka refused 1 message(s) of topic ns.db.t as invalid"), 3, "error"),
    (errors.LibraryVersionUnsupported("untested library version"), 3, "error"),
    (errors.PatchTargetMissing("library fix target is missing"), 3, "error"),
    (errors.StreamInterrupted("gave up"), 3, "error"),
    (errors.KafkaFatal("cannot create topic"), 4, "Kafka error"),
    (errors.Fenced("this instance was fenced"), 4, "fenced"),
    (errors.BatchAborted("commit failed"), 4, "Kafka error"),
    (errors.RegistryError("schema registry at http://x is not reachable"), 5, "error"),
    (errors.DeployError("no config for environment 'x'"), 1, "deploy error"),
    (errors.UnknownSchema("no writer schema with fingerprint 00"), 1, "error"),
]


def run_main(monkeypatch, fail):
    """cli.main for `streamer check` whose command raises what ``fail`` raises."""
    monkeypatch.setattr(cli, "cmd_check", lambda args: fail())
    return cli.main(["check", "-c", "unused.yaml"])


@pytest.mark.parametrize("exc,code,label", BY_CODE, ids=lambda v: type(v).__name__
                         if isinstance(v, Exception) else str(v))
def test_each_error_exits_with_its_code_and_one_line(monkeypatch, capsys, exc, code, label):
    def fail():
        raise exc

    assert run_main(monkeypatch, fail) == code
    err = capsys.readouterr().err
    assert err == f"streamer: {label}: {exc}\n"


def test_an_unsupported_column_type_exits_3_naming_the_column_and_the_way_out(monkeypatch, capsys):
    # Built from a table map, as the engine does; 243 (MYSQL_TYPE_INVALID) has no mapping.
    event = TableMap([Col("id", 3, True), Col("shape", 243)])
    assert run_main(monkeypatch, lambda: TableVersion("ns", event)) == errors.EXIT_SOURCE
    err = capsys.readouterr().err
    assert err.startswith("streamer: error: MySQL column type code 243 of column 'shape' has no "
                          "Avro mapping") and "tables.exclude" in err and err.count("\n") == 1


def test_a_kafka_error_the_streamer_did_not_wrap_still_exits_4(monkeypatch, capsys):
    def fail():
        raise KafkaException(KafkaError(KafkaError._TRANSPORT, "broker down"))

    assert run_main(monkeypatch, fail) == errors.EXIT_KAFKA
    assert capsys.readouterr().err.count("\n") == 1


def test_a_client_that_only_the_error_held_is_gone_when_main_returns(monkeypatch):
    # Under PyPy, what the error's traceback held would live on to the interpreter's teardown,
    # and a live Kafka client there can crash the exit (kafka.logs.free_dropped_clients).
    class Client:
        pass

    held = []

    def fail():
        client = Client()
        held.append(weakref.ref(client))
        raise errors.KafkaFatal("refused")

    assert run_main(monkeypatch, fail) == errors.EXIT_KAFKA
    assert held[0]() is None


def test_every_error_class_is_a_streamer_error_with_an_exit_code():
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass)
               if issubclass(c, Exception) and c.__module__ == errors.__name__]
    assert len(classes) >= 20
    for cls in classes:
        assert issubclass(cls, errors.StreamerError), cls
        assert cls.exit_code in (1, 2, 3, 4, 5), cls
