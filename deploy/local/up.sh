#!/usr/bin/env bash
# Starts the private MariaDB and Kafka the streamer and its tests use. Idempotent.
# The schema registry is not started here: deploy/local/registry.sh up.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
"$HERE/mysql.sh" up
"$HERE/kafka.sh" up
