import os
import re

from setuptools import find_packages, setup

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "streamer", "__init__.py"),
          encoding="utf-8") as fh:
    VERSION = re.search(r'^__version__ = "([^"]+)"', fh.read(), re.M).group(1)

setup(
    name="streamer",
    version=VERSION,
    description="MySQL binlog change-data-capture into Kafka as Avro, exactly once",
    packages=find_packages(include=["streamer", "streamer.*"]),
    package_data={"streamer": ["../schemas/*.avsc", "engine/warmup.binlog"]},
    python_requires=">=3.9",
    install_requires=[
        # Exact: streamer/source/patches refuses to start on versions its fixes weren't tested with.
        "mysql-replication==1.0.17",
        "PyMySQL==1.2.4",
        "fastavro==1.12.2",
        "PyYAML>=6,<7",
        'confluent-kafka==2.16.1; platform_python_implementation == "CPython"',
        'confluent-kafka-pypy==1.9.2; platform_python_implementation == "PyPy"',
        # The producer calls Debian's librdkafka through cffi (streamer/rdkafka.py); PyPy has it built in.
        'cffi>=1.15; platform_python_implementation == "CPython"',
        "signalfx==1.1.16",
        # MySQL's compressed transactions (source/payload.py). 0.21.0 is the last whose build
        # takes PyPy 3.9's own cffi (1.15); it has CPython 3.11 wheels too.
        "zstandard==0.21.0",
        # /metrics (ops/prom.py), imported only when metrics.http_port is set.
        "prometheus-client==0.21.1",
        # `streamer snapshot --follow`'s progress bars, on a terminal only (tools/snapshot.py).
        "tqdm==4.70.1",
        # vmprof 0.6.0 needs Python >= 3.10; 0.4.18.1 is the last release for PyPy 3.9.
        'vmprof==0.6.0; python_version >= "3.10"',
        'vmprof==0.4.18.1; python_version < "3.10"',
    ],
    extras_require={
        # supervisord stands in for systemd in the deploy tests (deploy/supervisor/).
        "test": ["pytest>=7,<9", "ruff==0.8.4", "supervisor==4.3.0",
                 # confluent-kafka's SchemaRegistryClient/AvroDeserializer, used by the registry
                 # tests as the standard consumer. Listed one by one: 2.16.1's [schemaregistry]
                 # extra pins a certifi release the package index doesn't have.
                 'requests>=2.25; platform_python_implementation == "PyPy"',
                 'attrs>=21.2.0; platform_python_implementation == "CPython"',
                 'cachetools>=5.5.0; platform_python_implementation == "CPython"',
                 'certifi; platform_python_implementation == "CPython"',
                 'httpx2>=2.0; platform_python_implementation == "CPython" and python_version >= "3.10"',
                 'httpx>=0.26; platform_python_implementation == "CPython" and python_version < "3.10"',
                 'authlib>=1.0.0; platform_python_implementation == "CPython"'],
    },
    entry_points={"console_scripts": ["streamer = streamer.cli:main"]},
)
