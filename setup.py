from setuptools import find_packages, setup

setup(
    name="streamer",
    version="0.1.0",
    description="MySQL binlog change-data-capture into Kafka as Avro, exactly once",
    packages=find_packages(include=["streamer", "streamer.*"]),
    package_data={"streamer": ["../schemas/*.avsc"]},
    python_requires=">=3.9",
    install_requires=[
        "mysql-replication==1.0.17",
        "PyMySQL>=1.1,<2",
        "fastavro==1.12.2",
        "PyYAML>=6,<7",
        'confluent-kafka==2.16.1; platform_python_implementation == "CPython"',
        'confluent-kafka-pypy==1.9.2; platform_python_implementation == "PyPy"',
    ],
    extras_require={
        "test": ["pytest>=7,<9", "ruff==0.8.4"],
    },
    entry_points={"console_scripts": ["streamer = streamer.cli:main"]},
)
