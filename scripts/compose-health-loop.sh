#!/usr/bin/env bash
#
# Runs the healthchecks of podman's containers that are starting or
# unhealthy, once a second, until killed. Podman runs healthchecks from
# systemd timers; scripts/compose-test.sh starts this loop where there is no
# systemd, so that compose's `condition: service_healthy` can be met.
while sleep 1; do
	for id in $(podman ps -q --filter health=starting --filter health=unhealthy); do
		podman healthcheck run "$id" >/dev/null 2>&1
	done
done
