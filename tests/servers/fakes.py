"""Fake llama-server binaries that die the way a broken build does (a real one will not
crash on demand). Each is an executable script accepting llama-server's argv."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

# Serves /health, then kills itself with ``SIGNAL`` at the first /completion: what a
# build with instructions this CPU refuses does at its first matrix product.
_DIES_AT_FIRST_REQUEST = '''
import http.server, os, signal, sys
port = int(sys.argv[sys.argv.index("--port") + 1])
class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers()
        self.wfile.write(b"{}")
    def do_POST(self):
        print("computing the first batch", flush=True)
        os.kill(os.getpid(), signal.{signal})
http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
'''


def dies_at_start(tmp_path: Path, signal: str = "SIGILL") -> Path:
    """A binary that logs a line and kills itself with ``signal`` during start-up."""
    script = tmp_path / "llama-server"
    script.write_text(f"#!/bin/sh\necho 'load_tensors: loading model'\nkill -{signal[3:]} $$\n")
    script.chmod(0o755)
    return script


def dies_at_first_request(tmp_path: Path, signal: str = "SIGILL") -> Path:
    """A binary that answers /health, then dies with ``signal`` at the first request."""
    script = tmp_path / "llama-server"
    body = textwrap.dedent(_DIES_AT_FIRST_REQUEST).replace("{signal}", signal)
    script.write_text(f"#!{sys.executable}\n{body}")
    script.chmod(0o755)
    return script


def fake_gguf(tmp_path: Path) -> Path:
    """A file that passes kvlab's GGUF check (its magic), enough for a fake server."""
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF" + bytes(60))
    return path
