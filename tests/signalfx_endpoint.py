"""A real local SignalFx ingest endpoint (SignalFx's SaaS can't run here): it decodes what the
streamer posts to /v2/datapoint as the documented protocol buffers, and keeps each request's
X-SF-Token."""
import gzip
import threading
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class IngestEndpoint:
    """A real local ingest endpoint: keeps every datapoint posted to /v2/datapoint, decoded."""

    def __init__(self):
        with warnings.catch_warnings():  # the generated module uses deprecated protobuf calls
            warnings.simplefilter("ignore", DeprecationWarning)
            from signalfx.generated_protocol_buffers import signal_fx_protocol_buffers_pb2 as pb2

        sink = self
        self.points = []
        self.tokens = set()
        self.lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                msg = pb2.DataPointUploadMessage()
                msg.ParseFromString(body)
                with sink.lock:
                    sink.tokens.add(self.headers.get("X-SF-Token"))
                    for dp in msg.datapoints:
                        v = dp.value
                        value = v.intValue if v.HasField("intValue") else v.doubleValue
                        sink.points.append((self.path, dp.metric, value,
                                            {d.key: d.value for d in dp.dimensions},
                                            pb2.MetricType.Name(dp.metricType)))
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"OK")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def latest(self, metric):
        with self.lock:
            found = [p for p in self.points if p[1] == metric]
        return found[-1] if found else None

    def values(self, metric):
        with self.lock:
            return [p[2] for p in self.points if p[1] == metric]

    def close(self):
        self.server.shutdown()
        self.server.server_close()
