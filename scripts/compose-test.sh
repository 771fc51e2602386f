#!/usr/bin/env bash
#
# `make compose-test`: starts compose.yaml for real and uses it, then
# removes it. Where no Docker engine runs (CI and the developer machines),
# Debian's podman serves the Docker API on a private socket and Debian's
# docker-compose 1.29 drives it; Docker Hub being out of reach, the
# official postgres, redis and nginx images are replaced by stand-ins built
# from Debian's packages (docker/test/compose.override.yaml) on a
# debian:bookworm base imported from a debootstrap root.
#
#   1. installs podman, runc, debootstrap and docker-compose when missing;
#   2. imports the base image (the debootstrap root is kept as
#      var/compose-test/bookworm.tar between runs);
#   3. builds every image and starts the stack;
#   4. scripts/compose-test.mjs writes through the proxy, reads the writes
#      back over syncs on each relay directly and through the proxy, kills
#      the capture that leads and sees the standby's signals reach a sync;
#   5. removes containers, networks and volumes and stops podman, also
#      when a step fails (then the services' logs are printed first).
#
# Built images stay in podman's storage as the next run's build cache
# (`podman system reset` drops them).
#
# Each run has a project name, a network range and host ports of its own,
# so that two runs on one host do not collide. It needs bash, curl and the
# Node.js of scripts/node-env.sh (scripts/install-deps.sh provides it), and
# runs apt-get and debootstrap through sudo when not run as root.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/node-env.sh
. scripts/node-env.sh
if ! comb_node_ok; then
	echo "compose-test: needs Node.js $COMB_NODE_MIN or newer: run scripts/install-deps.sh" >&2
	exit 1
fi

# Runs a command as root: directly when we are, else through sudo.
as_root() {
	if [ "$(id -u)" = 0 ]; then
		"$@"
	else
		sudo "$@"
	fi
}

cache=var/compose-test
run=$(mktemp -d /tmp/comb-compose.XXXXXX)
sock=$run/podman.sock
export DOCKER_HOST=unix://$sock
export CONTAINERS_CONF=$PWD/docker/test/containers.conf
project=combtest$$
compose=(docker-compose -p "$project" -f compose.yaml -f docker/test/compose.override.yaml)
service_pid=
health_pid=

step() {
	echo "== compose-test: $* (${SECONDS}s)"
}

cleanup() {
	local status=$?
	trap - EXIT INT TERM
	[ -n "$health_pid" ] && kill "$health_pid" 2>/dev/null
	if [ -n "$service_pid" ]; then
		if [ "$status" != 0 ]; then
			echo "== compose-test: failed; the services' last log lines:"
			"${compose[@]}" logs --no-color --tail=40 2>&1 || true
		fi
		step "removing the stack"
		"${compose[@]}" down --volumes --remove-orphans --timeout 5 >/dev/null 2>&1 ||
			echo "compose-test: docker-compose down failed" >&2
		kill "$service_pid" 2>/dev/null
		wait "$service_pid" 2>/dev/null
	fi
	rm -rf "$run"
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Without recommends (docker-compose's would bring in docker.io), so
# podman's network stack is named: netavark, its DNS server and iptables.
tools=(podman runc netavark aardvark-dns iptables debootstrap docker-compose)
if [ "$(dpkg-query -W -f='${db:Status-Abbrev}\n' "${tools[@]}" 2>/dev/null |
	grep -c '^ii')" != "${#tools[@]}" ]; then
	step "installing ${tools[*]}"
	as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
	as_root env DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq --no-install-recommends "${tools[@]}" >/dev/null
fi

if ! podman image exists docker.io/library/debian:bookworm; then
	if [ ! -s "$cache/bookworm.tar" ]; then
		step "debootstrap of Debian 12 into $cache"
		mkdir -p "$cache"
		as_root debootstrap --variant=minbase bookworm "$run/root" >"$run/debootstrap.log" 2>&1 ||
			{ tail -n 20 "$run/debootstrap.log"; exit 1; }
		as_root rm -rf "$run"/root/var/cache/apt/archives/*.deb "$run"/root/var/lib/apt/lists/*
		as_root tar -C "$run/root" -cf - . >"$cache/bookworm.tar.tmp"
		mv "$cache/bookworm.tar.tmp" "$cache/bookworm.tar"
		as_root rm -rf "$run/root"
	fi
	step "importing debian:bookworm"
	podman import --change 'CMD ["bash"]' "$cache/bookworm.tar" \
		docker.io/library/debian:bookworm >/dev/null
fi
# The comb Dockerfiles start from debian:12-slim: the same release.
podman tag docker.io/library/debian:bookworm docker.io/library/debian:12-slim

step "starting the podman API service"
podman system service --time=0 "unix://$sock" >"$run/podman.log" 2>&1 &
service_pid=$!
for _ in $(seq 100); do
	[ -S "$sock" ] && break
	sleep 0.1
done

# A password that would break a URL: the services get it as PGPASSWORD.
export POSTGRES_PASSWORD='c0mb p@ss/w:rd#%?'

step "building the images"
# The comb images compile the project while the stand-ins download their
# packages; relay and capture one after the other, so that the second
# reuses the first's build stage.
"${compose[@]}" build --parallel postgres redis proxy >"$run/build-standins.log" 2>&1 &
standins=$!
if ! "${compose[@]}" build migrate capture >"$run/build-comb.log" 2>&1; then
	tail -n 40 "$run/build-comb.log"
	exit 1
fi
wait "$standins" || { tail -n 40 "$run/build-standins.log"; exit 1; }

# Podman runs healthchecks from systemd timers, and there is no systemd
# here: run the checks of the containers not yet healthy every second, so
# that `condition: service_healthy` can be met.
scripts/compose-health-loop.sh &
health_pid=$!

# A host port nothing listens on now (a connection to it is refused), so
# that a local stack on 7446-7448 and another run keep theirs; below the
# kernel's ephemeral range (32768 and up), where other programs' ports
# come from. Chosen right before the stack starts.
free_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 12000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
}
COMB_PROXY_PORT=$(free_port)
COMB_RELAY1_PORT=$(free_port)
COMB_RELAY2_PORT=$(free_port)
export COMB_PROXY_PORT COMB_RELAY1_PORT COMB_RELAY2_PORT
# A network range of this run's own (one of 200), with the proxy's fixed
# address in it: the address the relays trust.
octet=$((20 + $$ % 200))
export COMB_SUBNET=172.31.$octet.0/24 COMB_PROXY_ADDRESS=172.31.$octet.10
step "starting the stack"
# Anything a killed earlier run left goes first: the stack starts empty.
"${compose[@]}" down --volumes --remove-orphans >/dev/null 2>&1
"${compose[@]}" up -d
proxy=http://127.0.0.1:$COMB_PROXY_PORT
for i in $(seq 120); do
	curl -fsS -o /dev/null "$proxy/readyz" 2>/dev/null && break
	[ "$i" = 120 ] && { echo "compose-test: the proxy is not ready after 60 s" >&2; exit 1; }
	sleep 0.5
done

# Logs are read with podman itself: docker-compose's `logs` takes seconds
# through podman's API.
logs() {
	podman logs "${project}_$1_1" 2>&1
}

# The capture that holds leadership is the one to kill.
leader=
for _ in $(seq 60); do
	for svc in capture capture-standby; do
		[[ $(logs "$svc") == *'leadership acquired'* ]] && leader=$svc
	done
	[ -n "$leader" ] && break
	sleep 0.5
done
[ -n "$leader" ] || { echo "compose-test: no capture leads" >&2; exit 1; }
standby=capture-standby
[ "$leader" = capture-standby ] && standby=capture

owner=$(logs migrate | sed -n 's/.*owner secret: \([0-9a-f]*\).*/\1/p')
step "writes and syncs ($leader leads)"
node scripts/compose-test.mjs "$proxy" "http://127.0.0.1:$COMB_RELAY1_PORT" \
	"http://127.0.0.1:$COMB_RELAY2_PORT" "$owner" -- podman kill "${project}_${leader}_1"
[[ $(logs "$standby") == *'leadership acquired'* ]] ||
	{ echo "compose-test: $standby never took over" >&2; exit 1; }
step "passed"
