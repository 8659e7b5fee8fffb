# MemoryStore — the two commands a newcomer needs:
#   make demo   run the main job on the embedded default (no cluster, no API key)
#   make test   install everything the suite needs and run all of it
PYTHON     ?= python3
VENV       ?= .venv
UV_VERSION := 0.13.9
BIN        := $(VENV)/bin
# The repo's top-level folders (operator/, service/) must never be imported by accident
# from the working directory: `operator` would shadow the standard library.
export PYTHONSAFEPATH := 1
export MEM0_TELEMETRY := False

.PHONY: install demo test docs lint format tools node-deps cluster-up kind-e2e release-check bench-service lock lock-operator clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml dev/pyproject.toml requirements.lock
	@echo "== installing pinned dependencies into $(VENV) (uv cache: ~/.cache/uv)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)
	$(BIN)/uv pip install --quiet --python $(BIN)/python -r requirements.lock
	$(BIN)/uv pip install --quiet --python $(BIN)/python --no-deps -e .
	$(BIN)/uv pip install --quiet --python $(BIN)/python --no-deps -e dev/
	@touch $@

demo: install
	$(BIN)/memorystore demo

# Lint, build (or reuse) the pinned Kubernetes binaries, then every test: unit, integration
# and the cluster tests on a local control plane (or on $$KUBECONFIG when it is set).
# pytest-xdist workers: the machine-level tests and the simulated-node cluster tests each stay
# in one worker, the rest fill the gaps (tests/conftest.py). Two workers more than the CPUs
# (at most 4): the two groups mostly wait (pods starting, a node's processes, servers
# polled), so while they run, the other workers keep the CPUs busy; with as many workers as
# CPUs, 1.3 of 2 CPUs were busy on average. PYTEST_WORKERS=0: one process.
# The pinned tools build in the background meanwhile (a cold build is many minutes of Go):
# a test that needs one waits for its build (one lock per tool group), the others go on,
# niced, so that on a cold machine the build, the longest path, is not slowed by them.
PYTEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 2 )))
TOOLS_LOG ?= .memorystore/tools-build.log
test: install lint docs node-deps
	@mkdir -p $(dir $(TOOLS_LOG))
	@echo "== building (or finding cached) the pinned Kubernetes tools in the background: $(TOOLS_LOG)"
	@$(BIN)/memorystore dev tools >$(TOOLS_LOG) 2>&1 & tools=$$!; \
	trap 'kill $$tools 2>/dev/null' INT TERM; \
	nice -n 10 $(BIN)/pytest -n $(PYTEST_WORKERS) --maxprocesses=4; status=$$?; \
	if ! wait $$tools; then echo "the tool build failed ($(TOOLS_LOG)):"; tail -n 20 $(TOOLS_LOG); status=1; fi; \
	tail -n 1 $(TOOLS_LOG); exit $$status

# The documentation site (docs/, mkdocs.yml): the generated reference pages must be current
# (regenerate: python -m memorystore_dev.docsgen --write), then a strict build into
# .memorystore/site, which fails on a broken link or anchor and on a page left out of the nav.
SITE_DIR ?= .memorystore/site
docs: install
	$(BIN)/python -m memorystore_dev.docsgen --check
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir $(SITE_DIR)

# Debian packages the machine-level tests need: the image builds (a private dockerd, a
# debootstrapped base) and the real node. One list: add packages here, not in a new target.
NODE_PACKAGES := docker.io debootstrap \
  containerd runc containernetworking-plugins iptables nftables conntrack ipset gcc libc6-dev
# Installed only as root and only when missing (quiet, no prompts; waits for a busy dpkg
# lock). Not root: the tests that need them skip and say why (and fail when CI=true).
node-deps:
	@if [ "$$(id -u)" != 0 ]; then \
	  echo "node-deps: not root: not installing $(NODE_PACKAGES) (tests needing them skip)"; \
	elif ! command -v apt-get >/dev/null; then \
	  echo "node-deps: no apt-get: not installing $(NODE_PACKAGES) (tests needing them skip)"; \
	else \
	  missing=$$(for p in $(NODE_PACKAGES); do \
	    dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	  if [ -n "$$missing" ]; then \
	    echo "== node-deps: apt-get install" $$missing; \
	    export DEBIAN_FRONTEND=noninteractive; \
	    apt-get -qq -o DPkg::Lock::Timeout=600 update && \
	    apt-get -qq -o DPkg::Lock::Timeout=600 install -y --no-install-recommends $$missing \
	      >/dev/null || exit 1; \
	  fi; \
	fi

# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok and helm (and
# the real node's kubelet, kube-proxy and CoreDNS), built from pinned Go modules into
# ~/.cache/memorystore/k8s-tools (minutes the first time).
tools: install
	$(BIN)/memorystore dev tools

# A local control plane on loopback until Ctrl-C; prints the KUBECONFIG to export.
cluster-up: tools
	$(BIN)/memorystore dev cluster

# The same cluster test suite on a kind cluster, for machines with Docker and kind
# (not this one: no Docker engine runs here).
KIND_CLUSTER ?= memorystore-e2e
KIND_KUBECONFIG ?= $(CURDIR)/.kind-$(KIND_CLUSTER).kubeconfig
RELEASE := $(shell cat VERSION)
IMAGES := ghcr.io/memorystore/memory-service:$(RELEASE) ghcr.io/memorystore/operator:$(RELEASE)
kind-e2e: install tools
	@docker info >/dev/null 2>&1 || { echo "kind-e2e needs a running Docker engine"; exit 2; }
	@command -v kind >/dev/null || { echo "kind-e2e needs kind on PATH (go install sigs.k8s.io/kind)"; exit 2; }
	docker build --target memory-service -t ghcr.io/memorystore/memory-service:$(RELEASE) .
	docker build --target operator -t ghcr.io/memorystore/operator:$(RELEASE) .
	kind create cluster --name $(KIND_CLUSTER) --kubeconfig $(KIND_KUBECONFIG) --wait 120s
	kind load docker-image --name $(KIND_CLUSTER) $(IMAGES)
	KUBECONFIG=$(KIND_KUBECONFIG) $(BIN)/pytest tests/e2e; status=$$?; \
	  kind delete cluster --name $(KIND_CLUSTER); rm -f $(KIND_KUBECONFIG); exit $$status

# ruff, then mypy over the product as installed (strict on the seams: pyproject's [tool.mypy]),
# then the GitHub workflows with the pinned actionlint (built from its Go module, cached)
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m memorystore_dev.typecheck
	$(BIN)/python -m memorystore_dev.version
	$(BIN)/python -m memorystore_dev.workflows

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# What a release publishes, built here from VERSION: the chart package and both images
# (docker archives), with sizes and digests (root: the image harness; `make node-deps`).
release-check: install node-deps
	$(BIN)/python -m memorystore_dev.release

bench-service: install
	$(BIN)/memorystore bench service

# Re-pin the whole dependency tree after changing pyproject.toml.
lock: install
	$(BIN)/uv pip compile pyproject.toml --extra dev --python-version 3.11 -o requirements.lock
	$(MAKE) lock-operator

# The operator image's pins: its direct dependencies (requirements-operator.in, at the
# versions pyproject.toml pins) resolved within requirements.lock, so shared pins agree.
lock-operator: install
	$(BIN)/uv pip compile requirements-operator.in --constraint requirements.lock \
	  --python-version 3.11 -o requirements-operator.lock

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
