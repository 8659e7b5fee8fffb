"""Local Kubernetes control plane for tests: pinned tool binaries built from registry packages."""
