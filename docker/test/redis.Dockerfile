# Test stand-in for the official redis:7 image, built from Debian's Redis 7
# for `make compose-test`: `redis-server ...` as the command, data in
# /data, and no protected mode (the official image turns it off too, so
# that other containers may connect).
FROM debian:bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends redis-server \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /data
EXPOSE 6379
# Runs the command with --protected-mode no added.
ENTRYPOINT ["sh", "-c", "exec \"$@\" --protected-mode no", "redis"]
CMD ["redis-server"]
