"""Every exception the streamer raises on purpose, and the exit code each one ends a command with.

A message says what went wrong, where, and the fix: ``cli.main`` prints it as it is, one line on
stderr, and exits with the class's ``exit_code``. Because ``cli.main`` catches ``StreamerError``,
no error of the streamer's own can end a command in a traceback.

``Transient`` errors are the engine's to handle (it aborts the batch, backs off and resumes from the
last checkpoint); one reaches the command line only when retrying was given up or a shutdown
interrupted it, and then exits with the code of the side it came from.
"""
from __future__ import annotations

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_CONFIG = 2
EXIT_SOURCE = 3
EXIT_KAFKA = 4
EXIT_REGISTRY = 5


class StreamerError(Exception):
    """Base of the streamer's errors; ``label`` prefixes the message on the command line."""
    exit_code = EXIT_ERROR
    label = "error"


# -- configuration ---------------------------------------------------------------------------------
class ConfigError(StreamerError, ValueError):
    """A config key is missing, malformed or out of range; the message names the key."""
    exit_code = EXIT_CONFIG
    label = "config error"


class TopicClash(ConfigError):
    """Two tables (or a table and one of the streamer's own topics) would go to one topic, or to
    two that Kafka takes as one: topics.names gives one of them its own."""


# -- the MySQL source ------------------------------------------------------------------------------
class SourceError(StreamerError):
    """A problem with the MySQL source that a retry will not fix; the message names the fix."""
    exit_code = EXIT_SOURCE


class PurgedBinlog(SourceError):
    """The binlog file to resume from is no longer on the server."""


class ServerBehind(SourceError):
    """The server to resume on lacks transactions the checkpoint has (source.failover)."""


class MissingColumnNames(SourceError):
    """The binlog carries no column names (binlog_row_metadata is not FULL)."""


class UnsupportedColumn(SourceError, ValueError):
    """A column type the streamer has no Avro mapping for."""


class UnsupportedValue(SourceError, ValueError):
    """A value of a supported type that the reader could not read faithfully."""


class UnsupportedEvent(SourceError):
    """A binlog event that carries changes the streamer cannot read (source.events)."""


class OversizedRow(SourceError):
    """A row change's message is bigger than Kafka takes: no retry can publish it."""


class RefusedRow(SourceError):
    """Kafka refuses a row change's message for a setting of its topic (INVALID_RECORD: a
    keyless one in a compacted topic): no retry can publish it."""


class SnapshotRefused(SourceError):
    """A snapshot can't be done as asked (no key to chunk by, a table not included, a condition
    the server refuses); the message names the table and the fix."""


class LibraryVersionUnsupported(SourceError):
    """The installed python-mysql-replication or PyMySQL is not a version the fixes were tested
    with (source.patches)."""


class PatchTargetMissing(SourceError):
    """A library fix found its target missing or with another signature (source.patches)."""


# -- Kafka -----------------------------------------------------------------------------------------
class KafkaFatal(StreamerError):
    """Kafka refused in a way a retry won't fix; the position was not advanced."""
    exit_code = EXIT_KAFKA
    label = "Kafka error"


class UnreadableCheckpoint(KafkaFatal):
    """The newest checkpoint record of the source can't be read as a position (kafka.checkpoints):
    an explicit start goes on without it."""


class Fenced(KafkaFatal):
    """Another instance with the same transactional.id took over."""
    label = "fenced"


class LeaseLost(KafkaFatal):
    """A hot-standby instance lost its lease (kafka.lease): it commits nothing more."""
    label = "lease lost"


class ProducerBroken(KafkaFatal):
    """librdkafka marked the producer unusable (fatal, but not fenced): replace it and resume."""


class OpenTransaction(KafkaFatal):
    """A transaction that was open when a settled read reached the end stayed open."""


# -- the schema registry ---------------------------------------------------------------------------
class RegistryError(StreamerError):
    """The schema registry refused or could not be reached; the message names the fix."""
    exit_code = EXIT_REGISTRY


# -- reading messages back -------------------------------------------------------------------------
class UnknownSchema(StreamerError, LookupError):
    """A message names a writer schema that the schema topic does not hold."""


class UndecodableMessage(StreamerError, ValueError):
    """A message's body does not decode with the writer schema its header names: cut short, or
    not written with that schema."""


class EndpointUnavailable(StreamerError):
    """No running streamer answered at the status endpoint."""


# -- releases and deploys --------------------------------------------------------------------------
class DeployError(StreamerError):
    """A deploy step failed; the message names the step and the fix."""
    label = "deploy error"


class ReleaseError(DeployError):
    """Building or installing a release failed."""


class ServiceError(DeployError):
    """The service manager (systemd, supervisord) refused or did not answer."""


# -- handled inside the engine ---------------------------------------------------------------------
class Transient(StreamerError):
    """Handled by the engine: abort the batch, back off and resume from the last checkpoint."""


class StreamInterrupted(Transient, ConnectionError):
    """The binlog connection was lost; resume from the last committed checkpoint."""
    exit_code = EXIT_SOURCE


class WithoutGtids(StreamInterrupted):
    """MySQL stopped sending the binlog by GTID set: transactions without a GTID (written while
    its gtid_mode was below ON) follow the stream's place, which it sends by file and offset
    only. The stream resumes so (engine.supervisor)."""


class GtidsOutOfOrder(WithoutGtids):
    """MariaDB refused a dump by GTID set past a domain's transactions numbered out of order (a
    lower sequence number logged after higher ones, without gtid_strict_mode): the stream's own
    binlog place, checked (source.failover.check_identity), is read by file instead."""


class ServerIdTaken(StreamInterrupted):
    """Another replica connected with the streamer's server_id, and the server ended the
    streamer's binlog stream in its favour. Retried, with a delay that keeps growing while it
    happens again (engine.supervisor), so that two readers of one id don't take the stream from
    each other every second."""


class ServerUnreachable(StreamInterrupted):
    """The server in use can't be connected to: with several mysql.hosts, the next is tried."""


class RolledBackRows(Transient):
    """A ROLLBACK TO SAVEPOINT took back rows of the open transaction that were published in
    the open batch: it is aborted and read again without them (engine.stages.savepoints)."""
    exit_code = EXIT_SOURCE


class RegistryUnavailable(RegistryError, Transient):
    """The schema registry could not be reached, or answered that it can't serve now (5xx, 408,
    429): the engine drops the open batch and resumes from the checkpoint with the reconnect
    backoff, the registry tried again when the table version is announced again."""


class BatchAborted(Transient):
    """The transaction was aborted; the caller resumes from the last committed checkpoint."""
    exit_code = EXIT_KAFKA
    label = "Kafka error"


class GeneratedWriterUnsupported(StreamerError, ValueError):
    """The generated Avro writer can't write this schema; the caller falls back to fastavro.
    Never leaves codec."""
