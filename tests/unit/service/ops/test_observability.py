"""The service's scrape-time metrics: what they read, and that a scrape never fails because
what they read is missing (a certificate mid-rotation, no re-index yet)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from prometheus_client import generate_latest

from memorystore.operator import tls
from memorystore.service.ops.observability import Metrics


def _samples(metrics: Metrics) -> dict[str, float]:
    text = generate_latest(metrics.registry).decode()
    return {
        line.split()[0]: float(line.split()[1])
        for line in text.splitlines()
        if line and not line.startswith("#")
    }


def test_the_certificate_expiry_is_the_served_files_not_after(tmp_path: Path):
    now = dt.datetime(2026, 12, 3, tzinfo=dt.UTC)
    ca = tls.issue_ca("acme", now)
    serving = tls.issue_serving(ca, ["acme-memory.tenants.svc"], now, dt.timedelta(days=90))
    cert = tmp_path / "tls.crt"
    cert.write_text(serving.cert)
    metrics = Metrics(lambda: 0, cert_file=str(cert))
    expiry = _samples(metrics)["memorystore_tls_certificate_expiry_timestamp_seconds"]
    assert expiry == (now + dt.timedelta(days=90)).timestamp()


def test_an_unreadable_certificate_leaves_the_series_out_not_the_scrape(tmp_path: Path):
    cert = tmp_path / "tls.crt"
    cert.write_text("-----BEGIN CERTIFICATE-----\nnot one\n-----END CERTIFICATE-----\n")
    samples = _samples(Metrics(lambda: 3, cert_file=str(cert)))
    assert "memorystore_tls_certificate_expiry_timestamp_seconds" not in samples
    assert samples["memorystore_memories"] == 3.0
    cert.unlink()
    assert "memorystore_tls_certificate_expiry_timestamp_seconds" not in _samples(
        Metrics(lambda: 3, cert_file=str(cert))
    )


def test_without_tls_there_is_no_certificate_series():
    assert not any("tls" in name for name in _samples(Metrics(lambda: 0)))


def test_reindex_progress_appears_once_a_run_has_begun():
    progress: list[tuple[int, int]] = []
    metrics = Metrics(lambda: 0, reindex=lambda: progress[-1] if progress else None)
    assert "memorystore_reindex_memories_done" not in _samples(metrics)
    progress.append((40, 250))
    samples = _samples(metrics)
    assert samples["memorystore_reindex_memories_done"] == 40.0
    assert samples["memorystore_reindex_memories_pending"] == 250.0
