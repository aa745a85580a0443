"""streamer: a MySQL or MariaDB binlog into Kafka as Avro, exactly once (README.md)."""

# The project's version; setup.py reads it from here. A deployed release adds its own name
# (streamer.ops.buildinfo).
__version__ = "0.1.0"
