"""MemoryStore's developer tools: the Kubernetes test harness and the benchmarks (not shipped)."""
