# comb-relay image: the HTTP and WebSocket API service, with comb-admin, the
# policy plugins, the migrations, scripts/bootstrap.sh and docker/migrate.sh
# (the compose file's one-shot `migrate` service runs the same image). Built
# with CMake on Debian 12, the platform comb targets; the runtime stage
# holds only the shared libraries the binaries load.

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
      libcivetweb1 libpq5 libhiredis0.14 libzmq5 libmsgpackc2 libsecp256k1-1 \
      libjansson4 libssl3 ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /var/lib/comb --create-home comb
COPY --from=build /src/build/bin/comb-relay /src/build/bin/comb-admin /opt/comb/bin/
COPY --from=build /src/build/lib/policy_default.so /src/build/lib/policy_auditor.so /opt/comb/lib/
COPY --from=build /src/migrations /opt/comb/migrations
COPY --from=build /src/scripts/bootstrap.sh /opt/comb/scripts/bootstrap.sh
COPY docker/migrate.sh /opt/comb/scripts/migrate.sh
COPY docker/entrypoint.sh /usr/local/bin/comb-entrypoint
ENV PATH=/opt/comb/bin:$PATH \
    COMB_MIGRATIONS_DIR=/opt/comb/migrations \
    COMB_LISTEN=0.0.0.0:7447
USER comb
WORKDIR /var/lib/comb
EXPOSE 7447
# Ready: PostgreSQL and Redis answer and the capture feed is alive.
HEALTHCHECK --interval=5s --timeout=3s --retries=5 \
  CMD curl -fsS -o /dev/null http://127.0.0.1:7447/readyz || exit 1
ENTRYPOINT ["comb-entrypoint"]
CMD ["comb-relay"]
