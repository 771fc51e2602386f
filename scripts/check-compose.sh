#!/usr/bin/env bash
#
# Static checks of the container files (CTest entry static/compose):
#   - compose.yaml parses as YAML (PyYAML, Debian's python3-yaml) and has the
#     stack docs/operations.md describes: postgres:15, redis:7, a one-shot
#     migrate service, a capture and a standby capture, two relay nodes on
#     different host ports, an nginx proxy, and a healthcheck on every
#     long-running service;
#   - it stays readable by docker-compose 1.29 and podman (no top-level
#     `name:`, no CMD healthcheck argument with a space, which podman's
#     Docker API splits) and builds each image tag in one service only;
#   - `make compose-test` (scripts/compose-test.sh) starts it for real;
#   - every build context, Dockerfile and COPY source it references exists,
#     COPYied scripts are executable, depends_on and volumes name defined
#     services and volumes, each ${VAR} it interpolates is documented in
#     .env.example;
#   - the relays trust X-Forwarded-For from the proxy's fixed address only,
#     the proxy does not serve /metrics, and the one-shot migrate service
#     has no healthcheck;
#   - every shell script under scripts/ and docker/ passes `bash -n`/`sh -n`.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

py=""
for candidate in /usr/bin/python3 python3; do
	if command -v "$candidate" >/dev/null 2>&1 &&
		"$candidate" -c 'import yaml' >/dev/null 2>&1; then
		py=$candidate
		break
	fi
done
if [ -z "$py" ]; then
	echo "check-compose: no python3 with PyYAML (install python3-yaml: scripts/install-deps.sh)" >&2
	exit 1
fi

"$py" - <<'EOF'
import glob
import os
import re
import sys

import yaml

errors = []


def err(msg):
    errors.append(msg)


with open("compose.yaml") as f:
    compose = yaml.safe_load(f)

if not isinstance(compose, dict) or not isinstance(compose.get("services"), dict):
    print("check-compose: compose.yaml has no services mapping")
    sys.exit(1)

services = compose["services"]
volumes = compose.get("volumes") or {}

with open(".env.example") as f:
    documented = {m.group(1) for m in re.finditer(r"^([A-Z_][A-Z0-9_]*)=", f.read(), re.M)}

with open("compose.yaml") as f:
    raw = f.read()
for var in sorted(set(re.findall(r"\$\{([A-Z_][A-Z0-9_]*)", raw))):
    if var not in documented:
        err(f"compose.yaml uses ${{{var}}} but .env.example does not document it")


def image_of(name):
    return (services.get(name) or {}).get("image", "")


for name, want in (("postgres", "postgres:15"), ("redis", "redis:7")):
    if name not in services:
        err(f"service {name} is missing")
    elif image_of(name) != want:
        err(f"service {name} must use image {want}, not {image_of(name)!r}")


def dockerfile_of(svc):
    b = svc.get("build")
    if b is None:
        return None
    if isinstance(b, str):
        return os.path.join(b, "Dockerfile")
    return os.path.join(b.get("context", "."), b.get("dockerfile", "Dockerfile"))


def command_text(svc):
    c = svc.get("command", "")
    return " ".join(c) if isinstance(c, list) else str(c)


if "name" in compose:
    err("top-level name: is refused by docker-compose 1.29: set COMPOSE_PROJECT_NAME")

builders = {}
for n, svc in services.items():
    if svc.get("build") is not None:
        tag = svc.get("image", "")
        if tag in builders:
            err(f"services {builders[tag]} and {n} both build {tag!r}")
        builders[tag] = n
for n, svc in services.items():
    tag = svc.get("image", "")
    if svc.get("build") is None and tag.endswith(":local") and tag not in builders:
        err(f"service {n} uses {tag} that no service builds")

relays = [n for n, s in services.items()
          if s.get("image") == "comb-relay:local" and "migrate" not in command_text(s)]
captures = [n for n, s in services.items() if s.get("image") == "comb-capture:local"]
proxies = [n for n, s in services.items() if str(s.get("image", "")).startswith("nginx:")]
if "migrate" not in services:
    err("service migrate is missing")
elif services["migrate"].get("restart", "no") not in ("no", False):
    err("service migrate must be one-shot (restart: \"no\")")
if len(captures) < 2:
    err(f"want a capture and a standby capture, found {captures}")
if len(relays) < 2:
    err(f"want two relay nodes, found {relays}")
if not proxies:
    err("no nginx proxy service")
for n in proxies:
    for v in services[n].get("volumes") or []:
        src = str(v).split(":")[0]
        if src.startswith(".") and not os.path.exists(src):
            err(f"service {n} mounts {src}, which does not exist")

for n, svc in services.items():
    test = (svc.get("healthcheck") or {}).get("test") or []
    if isinstance(test, list) and test[:1] == ["CMD"] and any(" " in a for a in test[1:]):
        err(f"service {n}: a CMD healthcheck argument holds a space (use CMD-SHELL)")

host_ports = {}
for name in relays:
    for p in services[name].get("ports", []):
        parts = str(p).split(":")
        host = ":".join(parts[:-1])
        if host in host_ports:
            err(f"relays {host_ports[host]} and {name} publish the same host port {host}")
        host_ports[host] = name
    if not services[name].get("ports"):
        err(f"relay {name} publishes no port")

for name, svc in services.items():
    if name != "migrate" and not svc.get("healthcheck"):
        err(f"service {name} has no healthcheck")
if "migrate" in services and (services["migrate"].get("healthcheck") or {}).get("disable") is not True:
    err("service migrate must disable the relay image's healthcheck (it is one-shot)")

# The relays trust X-Forwarded-For from the proxy's fixed address only,
# and the proxy keeps /metrics to the stack's network.
for n in proxies:
    nets = services[n].get("networks") or {}
    addr = ((nets.get("default") or {}) if isinstance(nets, dict) else {}).get("ipv4_address")
    if not addr:
        err(f"proxy {n} has no fixed ipv4_address on the default network")
    for r in relays:
        trusted = (services[r].get("environment") or {}).get("COMB_TRUSTED_PROXIES")
        if trusted != addr:
            err(f"relay {r} trusts {trusted!r}, not the proxy's address {addr!r}")
with open("docker/nginx.conf") as f:
    if not re.search(r"location\s*=\s*/metrics\s*\{\s*return 404;", f.read()):
        err("docker/nginx.conf must not serve /metrics (location = /metrics { return 404; })")

dockerfiles = set()
for name, svc in services.items():
    deps = svc.get("depends_on") or []
    for dep in (deps if isinstance(deps, list) else deps.keys()):
        if dep not in services:
            err(f"service {name} depends on unknown service {dep}")
    for v in svc.get("volumes") or []:
        src = (v.get("source") if isinstance(v, dict) else str(v).split(":")[0])
        if src and not src.startswith((".", "/", "~")) and src not in volumes:
            err(f"service {name} mounts undeclared volume {src}")
    df = dockerfile_of(svc)
    if df is None:
        if "image" not in svc:
            err(f"service {name} has neither image nor build")
        continue
    b = svc["build"]
    context = b if isinstance(b, str) else b.get("context", ".")
    if not os.path.isdir(context):
        err(f"service {name}: build context {context} does not exist")
    if not os.path.isfile(df):
        err(f"service {name}: {df} does not exist")
        continue
    dockerfiles.add((df, context))

for df, context in sorted(dockerfiles):
    with open(df) as f:
        text = f.read()
    # Join continuation lines, drop comments.
    text = re.sub(r"\\\n", " ", text)
    lines = [l.strip() for l in text.splitlines() if l.strip() and not l.strip().startswith("#")]
    if not lines or not lines[0].upper().startswith(("FROM", "ARG")):
        err(f"{df}: does not start with FROM")
    for line in lines:
        word = line.split()[0].upper()
        if word not in ("COPY", "ADD"):
            continue
        args = [a for a in line.split()[1:]]
        if any(a.startswith("--from") for a in args):
            # Files the build stage took from the source tree (/src) rather
            # than produced (/src/build) must exist in the repository too.
            for src in [a for a in args if not a.startswith("--")][:-1]:
                if src.startswith("/src/") and not src.startswith("/src/build/"):
                    if not glob.glob(os.path.join(context, src[len("/src/"):])):
                        err(f"{df}: {src} has no source {src[len('/src/'):]}")
            continue
        args = [a for a in args if not a.startswith("--")]
        if len(args) < 2:
            err(f"{df}: malformed {line!r}")
            continue
        for src in args[:-1]:
            path = os.path.normpath(os.path.join(context, src))
            matches = glob.glob(path)
            if not matches:
                err(f"{df}: {word} source {src} does not exist")
            for m in matches:
                if m.endswith(".sh") and not os.access(m, os.X_OK):
                    err(f"{df}: {m} is not executable")

if errors:
    for e in errors:
        print(f"check-compose: {e}")
    sys.exit(1)
print(f"check-compose: compose.yaml ok: {len(services)} services, "
      f"{len(dockerfiles)} Dockerfiles, relays {relays}, captures {captures}, "
      f"proxy {proxies}")
EOF

status=0
for f in scripts/*.sh docker/*.sh .ci/run; do
	[ -f "$f" ] || continue
	case $(head -n 1 "$f") in
	*bash*) bash -n "$f" || status=1 ;;
	*) sh -n "$f" || status=1 ;;
	esac
done
if [ "$status" != 0 ]; then
	echo "check-compose: a script has a syntax error" >&2
	exit 1
fi
echo "check-compose: scripts parse"
