"""The benchmarks behind `memorystore bench`: service, agent, operator, LoCoMo recall."""
