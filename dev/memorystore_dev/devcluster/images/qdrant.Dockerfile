# The managed tier's Qdrant, for the real-node tests: the vendored server binary
# (../shared/vendor/qdrant/, built from Qdrant's source; its README says how) on the project's
# own base, laid out as the official image is (WORKDIR /qdrant, ./qdrant), so the operator's
# StatefulSet runs it unchanged. No registry here serves qdrant/qdrant.
#
# Built by ImageBuilder.build_qdrant() with a context holding only the binary; the base comes
# in as for the project's Dockerfile (--build-arg BASE_IMAGE=<local Debian image>).
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
# Qdrant builds its HTTP client (for inference services) at start and panics without the
# system's CA certificates ("No CA certificates were loaded from the system").
RUN command -v update-ca-certificates >/dev/null || ( \
      apt-get update \
   && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates \
   && apt-get clean && rm -rf /var/lib/apt/lists/* )
# Non-root (uid 1000: QDRANT_UID, what the StatefulSet's pod security context runs as); the
# data directories are volumes, so the root filesystem can be read-only.
RUN useradd --uid 1000 --user-group --no-create-home --shell /usr/sbin/nologin qdrant \
 && mkdir -p /qdrant/storage /qdrant/snapshots /qdrant/init \
 && chown 1000:1000 /qdrant/storage /qdrant/snapshots /qdrant/init
COPY --chmod=0555 qdrant /qdrant/qdrant
WORKDIR /qdrant
USER 1000:1000
# Fail the build, not the first pod, if the binary cannot run on this base.
RUN ./qdrant --version
EXPOSE 6333 6334 6335
ENTRYPOINT ["./qdrant"]
