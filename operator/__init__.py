"""The kopf operator that reconciles MemoryStore resources (built in the operator issue)."""
