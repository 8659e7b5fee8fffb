"""The relay that lets pods reach the API server (node/relay.py), as a real process."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from pathlib import Path


def test_the_relay_copies_both_ways_and_passes_half_close(tmp_path: Path):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    target = server.getsockname()[1]

    def echo_until_eof() -> None:
        conn, _ = server.accept()
        with conn:
            data = b""
            while chunk := conn.recv(65536):
                data += chunk
            conn.sendall(data[::-1])  # answer only after the client's EOF arrived

    threading.Thread(target=echo_until_eof, daemon=True).start()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        listen = probe.getsockname()[1]
    relay = subprocess.Popen(
        [sys.executable, "-m", "memorystore_dev.devcluster.node.relay",
         f"127.0.0.1:{listen}", f"127.0.0.1:{target}"],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert relay.stdout is not None
        assert "relaying" in relay.stdout.readline()
        payload = bytes(range(256)) * 1000
        with socket.create_connection(("127.0.0.1", listen), timeout=5) as client:
            client.sendall(payload)
            client.shutdown(socket.SHUT_WR)
            got = b""
            while chunk := client.recv(65536):
                got += chunk
        assert got == payload[::-1]
    finally:
        relay.terminate()
        assert relay.wait(timeout=10) == 0
        server.close()


def test_the_relay_refuses_a_bad_address():
    proc = subprocess.run(
        [sys.executable, "-m", "memorystore_dev.devcluster.node.relay", "nohost", "127.0.0.1:1"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode != 0
    assert "not HOST:PORT: 'nohost'" in proc.stderr
