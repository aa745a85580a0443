"""Where the project's copy of librdkafka lives: constants only, so that building a release
(deploy.release) needs neither the Kafka client nor cffi."""
import os
import sys

SYSTEM = "librdkafka.so.1"  # found by the dynamic linker
# The project's copy (deploy/librdkafka.sh), under the prefix of the interpreter running the
# streamer (a release or a development venv); deploy.release and the Makefile install it there.
BUNDLED_RELPATH = os.path.join("lib", "streamer", SYSTEM)
BUNDLED = os.path.join(sys.prefix, BUNDLED_RELPATH)
