#!/usr/bin/env bash
# Stops whichever of the local servers (Kafka Connect, registry, Kafka, the replica, the other
# sources, MariaDB) is running.
# Idempotent.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
"$HERE/connect.sh" down
"$HERE/registry.sh" down
"$HERE/kafka.sh" down
"$HERE/replica.sh" down
"$HERE/sources.sh" down
"$HERE/mysql.sh" down
