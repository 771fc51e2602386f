# comb-capture image: the change-capture service that LISTENs on PostgreSQL,
# SUBSCRIBEs to Redis and PUBlishes per-channel signals over ZeroMQ. Same
# build as docker/relay.Dockerfile (Docker reuses its cached build stage);
# the runtime stage keeps comb-capture and comb-admin.

FROM debian:12-slim AS build
# The package lists stay: the build downloads Debian's civetweb source
# from where apt finds it (shared/civetweb).
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      build-essential cmake pkg-config ca-certificates dpkg-dev patch \
      libpq-dev libhiredis-dev libzmq3-dev \
      libmsgpack-dev libsecp256k1-dev libjansson-dev libcmocka-dev libssl-dev
WORKDIR /src
COPY CMakeLists.txt Makefile ./
COPY shared shared
COPY services services
COPY plugins plugins
COPY migrations migrations
COPY tests tests
COPY scripts scripts
RUN make build BUILD_DIR=/src/build

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
# Alive while PID 1 (comb-capture, exec'd by the entrypoint) runs.
HEALTHCHECK --interval=5s --timeout=3s --retries=3 \
  CMD test -d /proc/1 || exit 1
ENTRYPOINT ["comb-entrypoint"]
CMD ["comb-capture"]
