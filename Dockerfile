# llmgate container image (docs/operations.md, "The container image"):
#   docker build -t llmgate .
#   docker run --rm -p 8080:8080 -p 8081:8081 -e OPENAI_API_KEY \
#     -v "$PWD/llmgate.yaml:/etc/llmgate/llmgate.yaml:ro" llmgate
# The build stage runs the same script as CI and the README (tools/setup.sh:
# Debian packages, then CMake + Ninja into build/), without the test suite.
# The runtime stage is debian:12-slim with only the shared libraries the two
# binaries load; tests/deploy/dockerfile.test.mjs checks that list against
# `ldd build/bin/llmgate`.

FROM debian:12 AS build
# Parallel compile jobs: each Beast translation unit needs ~700 MB with g++.
ARG JOBS=2
WORKDIR /src
COPY . .
# LLMGATE_DEPS=build: compiler and -dev packages only, -DLLMGATE_BUILD_TESTS=OFF.
# The ccache cache mount (BuildKit) makes rebuilds incremental.
RUN --mount=type=cache,target=/root/.cache/ccache \
    LLMGATE_DEPS=build JOBS="${JOBS}" tools/setup.sh \
 && install -D -s -m 0755 build/bin/llmgate /out/llmgate \
 && install -D -s -m 0755 build/bin/llmgate-sim /out/llmgate-sim

FROM debian:12-slim AS runtime
LABEL org.opencontainers.image.title="llmgate" \
      org.opencontainers.image.description="OpenAI-compatible, latency-aware LLM routing gateway"
# The binaries' shared libraries beyond libc6, libgcc-s1 and libstdc++6, which
# the base image already has (apt depends on them); ca-certificates for TLS to
# the providers.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      ca-certificates \
      libprometheus-cpp-core1.0 \
      libssl3 \
      libyaml-cpp0.7 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/llmgate /out/llmgate-sim /usr/local/bin/
# glibc's per-thread cache keeps 7 freed blocks of a size by default; a
# request frees more than that of some sizes at once (its strings, buffers and
# coroutine frames), and the rest went through malloc's slower bins. 64 per
# size: ~4-5% fewer instructions per request, no measurable memory per open
# stream (bench/README.md, "Performance II, part 8"). bench/overhead reads
# this line and runs llmgate with it.
ENV GLIBC_TUNABLES=glibc.malloc.tcache_count=64
# Numeric, so Kubernetes can verify runAsNonRoot; 65532 is the usual "nonroot".
USER 65532:65532
# 8080: the OpenAI API (server.listeners). 8081: /healthz, /readyz, /metrics
# and /admin/* (server.admin_listener). The config decides both; its built-in
# default is 127.0.0.1:8080, so a config for a container must bind 0.0.0.0.
EXPOSE 8080 8081
# The gateway drains on SIGTERM (server.drain), then exits 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/llmgate"]
CMD ["--config", "/etc/llmgate/llmgate.yaml"]
