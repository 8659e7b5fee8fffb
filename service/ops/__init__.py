"""Running the service: tenant keys, TLS, metrics and request limits, the in-process runner."""
