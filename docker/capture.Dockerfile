# comb-capture image: the change-capture service that LISTENs on PostgreSQL,
# SUBSCRIBEs to Redis and PUBlishes per-channel signals over ZeroMQ. Same
# build as docker/relay.Dockerfile (Docker reuses its cached build stage);
# the runtime stage keeps comb-capture and comb-admin.

FROM debian:12-slim AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      build-essential cmake pkg-config ca-certificates \
      libcivetweb-dev civetweb libpq-dev libhiredis-dev libzmq3-dev \
      libmsgpack-dev libsecp256k1-dev libjansson-dev libcmocka-dev libssl-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY CMakeLists.txt ./
COPY shared shared
COPY services services
COPY plugins plugins
COPY migrations migrations
COPY tests tests
COPY scripts scripts
# Only what the images ship; the tests are configured but not built.
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo \
 && cmake --build build -j"$(nproc)" --target \
      comb-relay comb-capture comb-admin comb_policy_default comb_policy_auditor

FROM debian:12-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libpq5 libhiredis0.14 libzmq5 libmsgpackc2 libsecp256k1-1 libjansson4 \
      libssl3 ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /var/lib/comb --create-home comb
COPY --from=build /src/build/bin/comb-capture /src/build/bin/comb-admin /opt/comb/bin/
COPY docker/entrypoint.sh /usr/local/bin/comb-entrypoint
ENV PATH=/opt/comb/bin:$PATH \
    COMB_CAPTURE_ENDPOINT=tcp://0.0.0.0:7450
USER comb
WORKDIR /var/lib/comb
EXPOSE 7450
# Alive: comb-capture (exec'd by the entrypoint) is PID 1 and its ZeroMQ
# endpoint, port 7450 (1D1A in hex), is listening; leader and standby
# both bind it.
HEALTHCHECK --interval=5s --timeout=3s --retries=3 \
  CMD grep -qx comb-capture /proc/1/comm \
   && awk '$2 ~ /:1D1A$/ && $4 == "0A" { f = 1 } END { exit !f }' /proc/net/tcp
ENTRYPOINT ["comb-entrypoint"]
CMD ["comb-capture"]
