#!/usr/bin/python3
"""Runs the services of docker/compose.yaml with podman, the way `docker compose` runs them.

  compose-podman.py [-f FILE] [-p PROJECT] images        the images to build: one line per
                                                         service with a build section,
                                                         "IMAGE<TAB>CONTEXT<TAB>DOCKERFILE"
  compose-podman.py [-f FILE] [-p PROJECT] up            create the network and volumes, start
                                                         the services in dependency order
  compose-podman.py [-f FILE] [-p PROJECT] down [-v]     stop and remove them (-v: and the
                                                         project's named volumes)
  compose-podman.py [-f FILE] [-p PROJECT] container SERVICE   print the service's container name
  compose-podman.py [-f FILE] [-p PROJECT] config        print the file as read, interpolated, JSON

scripts/container.sh calls this with its containers.conf in CONTAINERS_CONF; podman must be on
PATH. FILE defaults to docker/compose.yaml, PROJECT to the file's top-level name. Like compose,
-f may be given again for an override file (docker/compose.host-ca.yaml): the override may add
or replace services' volumes (by target path) and environment variables (by name), nothing
else; paths are relative to the first file's folder.

Why not podman-compose: Debian 12's podman-compose (1.0.3) turns an exec-form healthcheck into a
shell command line in which a `$` is expanded again (compose.yaml's broker check subscribes to
`$SYS/broker/version`, which it breaks), ignores stop_grace_period and ignores depends_on
conditions. This runner is strict instead: it supports the compose keys compose.yaml uses, with
compose's meaning, and refuses any other key, so the container tests cannot run something other
than what Docker users run without saying so. What it does, per compose key:

  name, services, volumes (top level)   project name; services; named volumes, created as
                                        PROJECT_NAME like compose does
  image, build.context/dockerfile       the image to run (built by scripts/container.sh)
  volumes                               ./relative:/path[:ro] binds (relative to the file's
                                        folder), NAME:/path named volumes (must be declared)
  ports                                 -p as written (HOST_IP:HOST_PORT:CONTAINER_PORT; an empty
                                        host port is any free port)
  environment                           -e NAME=VALUE
  healthcheck                           --health-* (test as CMD exec form or CMD-SHELL)
  depends_on.X.condition                service_started, or service_healthy: the health check is
                                        run until healthy, within start_period + interval *
                                        retries, like compose waits for Docker's checks
  init, cap_drop, security_opt,         --init, --cap-drop, --security-opt, --restart,
  restart, stop_grace_period            --stop-timeout
  (every service)                       one network PROJECT_default, the service name as a
                                        network alias, the container named PROJECT-SERVICE-1 and
                                        labelled com.docker.compose.project/service

Interpolation as compose does it: $$ is a literal $, ${NAME}, $NAME, ${NAME-default} (default
when unset) and ${NAME:-default} (default when unset or empty) from the environment; an unset
variable without a default becomes empty, with a warning, like compose.

Podman needs systemd to run health checks on a timer; without it (containers, CI machines) they
run only when asked, `podman healthcheck run CONTAINER`, which is what the wait for
service_healthy and the tests do. Exit status: 0 done, 1 failure, 2 bad usage or a compose file
this runner refuses.
"""

import argparse
import json
import math
import os
import re
import subprocess
import sys
import time

import yaml

TOP_KEYS = {"name", "services", "volumes"}
SERVICE_KEYS = {"image", "build", "volumes", "ports", "environment", "healthcheck", "depends_on",
                "init", "cap_drop", "security_opt", "restart", "stop_grace_period"}
BUILD_KEYS = {"context", "dockerfile"}
HEALTH_KEYS = {"test", "interval", "timeout", "retries", "start_period"}
DEPENDS_KEYS = {"condition"}
CONDITIONS = {"service_started", "service_healthy"}


class Refused(Exception):
    """The compose file uses something this runner does not run."""


def fail(message):
    print(f"compose-podman: {message}", file=sys.stderr)
    sys.exit(1)


# ---- reading ----------------------------------------------------------------------------------

class StrictLoader(yaml.SafeLoader):
    """PyYAML keeps the last of two equal keys; compose (and Docker) refuse the file."""


def _mapping(loader, node, deep=False):
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise Refused(f"line {key_node.start_mark.line + 1}: duplicate key {key}")
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)

VAR = re.compile(r"\$(?:(\$)|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*)|(.?))")


def interpolate(text, where):
    def one(m):
        if m.group(1):
            return "$"
        name = m.group(2) or m.group(5)
        if name is None:
            raise Refused(f"{where}: a $ that is neither $$ nor ${{NAME}}: {text!r}")
        value = os.environ.get(name)
        if m.group(3) == "-" and value is None:
            return m.group(4)
        if m.group(3) == ":-" and not value:
            return m.group(4)
        if value is None:
            print(f"compose-podman: {where}: {name} is not set; using an empty string "
                  f"(as compose does)", file=sys.stderr)
            return ""
        return value
    return VAR.sub(one, text)


def interpolate_all(node, where):
    if isinstance(node, dict):
        return {k: interpolate_all(v, f"{where}.{k}" if where else k) for k, v in node.items()}
    if isinstance(node, list):
        return [interpolate_all(v, f"{where}[{i}]") for i, v in enumerate(node)]
    if isinstance(node, str):
        return interpolate(node, where)
    return node


def read(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        doc = yaml.load(text, Loader=StrictLoader)
    except yaml.YAMLError as e:
        raise Refused(f"{path}: not valid YAML: {e}")
    except Refused as e:
        raise Refused(f"{path}: {e}")
    if not isinstance(doc, dict):
        raise Refused(f"{path}: the top level must be a mapping")
    for key in doc:
        if key not in TOP_KEYS:
            raise Refused(f"{path}: top-level key {key} is not supported by this runner")
    return interpolate_all(doc, "")


def merge(doc, override, path):
    """An override file's services.X.volumes and .environment, merged as compose merges them."""
    for key in override:
        need(key == "services", f"{path}: an override may only change services")
    for name, extra in (override.get("services") or {}).items():
        need(name in doc["services"], f"{path}: no service {name} in the first file")
        need(isinstance(extra, dict) and set(extra) <= {"volumes", "environment"},
             f"{path}: services.{name}: an override may only add volumes and environment")
        svc = doc["services"][name]
        if "environment" in extra:
            need(isinstance(extra["environment"], dict),
                 f"{path}: services.{name}.environment: a mapping NAME: value")
            svc["environment"] = {**(svc.get("environment") or {}), **extra["environment"]}
        if "volumes" in extra:
            need(isinstance(extra["volumes"], list) and
                 all(isinstance(v, str) and len(v.split(":")) in (2, 3) for v in extra["volumes"]),
                 f"{path}: services.{name}.volumes: SOURCE:TARGET[:ro] entries")
            targets = {v.split(":")[1] for v in extra["volumes"]}
            svc["volumes"] = [v for v in svc.get("volumes") or [] if v.split(":")[1] not in targets]
            svc["volumes"] += extra["volumes"]


def load(paths):
    doc = read(paths[0])
    need(isinstance(doc.get("services"), dict), f"{paths[0]}: no services")
    for path in paths[1:]:
        merge(doc, read(path), path)
    services = doc.get("services")
    if not isinstance(services, dict) or not services:
        raise Refused("no services")
    for name, svc in services.items():
        check_service(name, svc, doc.get("volumes") or {})
    return doc


def need(cond, message):
    if not cond:
        raise Refused(message)


def check_service(name, svc, declared):
    where = f"services.{name}"
    need(isinstance(svc, dict), f"{where} must be a mapping")
    for key in svc:
        need(key in SERVICE_KEYS, f"{where}.{key} is not supported by this runner")
    need(isinstance(svc.get("image"), str),
         f"{where}.image: give the image's name (the runner does not invent one)")
    build = svc.get("build")
    if build is not None:
        need(isinstance(build, dict) and set(build) <= BUILD_KEYS,
             f"{where}.build: a mapping of context and dockerfile")
    for v in svc.get("volumes") or []:
        need(isinstance(v, str) and len(v.split(":")) in (2, 3),
             f"{where}.volumes: {v!r}: SOURCE:TARGET[:ro] expected")
        source = v.split(":")[0]
        if not source.startswith((".", "/")):
            need(source in declared, f"{where}.volumes: named volume {source} is not declared "
                                     f"under the top-level volumes")
    for p in svc.get("ports") or []:
        # Unquoted, YAML 1.1 (PyYAML) reads 22:22 as a number and YAML 1.2 (compose) as text.
        need(isinstance(p, str), f"{where}.ports: {p!r}: quote port mappings")
    env = svc.get("environment") or {}
    need(isinstance(env, dict), f"{where}.environment: a mapping NAME: value")
    for k, v in env.items():
        need(isinstance(v, (str, int)) and not isinstance(v, bool),
             f"{where}.environment.{k}: quote the value")
    hc = svc.get("healthcheck")
    if hc is not None:
        need(isinstance(hc, dict) and set(hc) <= HEALTH_KEYS,
             f"{where}.healthcheck: supported keys are {', '.join(sorted(HEALTH_KEYS))}")
        test = hc.get("test")
        need(isinstance(test, list) and len(test) >= 2 and test[0] in ("CMD", "CMD-SHELL") and
             all(isinstance(t, str) for t in test),
             f"{where}.healthcheck.test: [\"CMD\", ...] or [\"CMD-SHELL\", \"...\"] of strings")
    deps = svc.get("depends_on") or {}
    need(isinstance(deps, dict), f"{where}.depends_on: a mapping SERVICE: {{condition: ...}}")
    for dep, spec in deps.items():
        need(isinstance(spec, dict) and set(spec) <= DEPENDS_KEYS and
             spec.get("condition", "service_started") in CONDITIONS,
             f"{where}.depends_on.{dep}: condition service_started or service_healthy")


def seconds(duration, where):
    """A compose duration (1m30s, 500ms, 20s) in seconds."""
    if isinstance(duration, int):
        return duration
    total = 0.0
    parts = re.findall(r"(\d+(?:\.\d+)?)(h|ms|m|s|us)", duration)
    need(parts and "".join(n + u for n, u in parts) == duration,
         f"{where}: {duration!r} is not a duration such as 30s or 1m30s")
    for n, unit in parts:
        total += float(n) * {"h": 3600, "m": 60, "s": 1, "ms": 1e-3, "us": 1e-6}[unit]
    return total


# ---- running ----------------------------------------------------------------------------------

def podman(*args, check=True, capture=False):
    r = subprocess.run(["podman", *args], text=True,
                       stdout=subprocess.PIPE if capture else None, stderr=subprocess.PIPE)
    # Without systemd podman cannot put a health check on a timer and says so at every start
    # and removal (the checks still run when asked, see the module's description); without a
    # syslog daemon its cleanup process says it has none. Neither is news.
    noise = ("unable to get systemd connection", "failed to connect to syslog")
    err = [line for line in r.stderr.splitlines() if not any(n in line for n in noise)]
    if err:
        print("\n".join(err), file=sys.stderr)
    if check and r.returncode != 0:
        fail(f"podman {' '.join(args)} failed (exit status {r.returncode})")
    return r


def container_name(project, service):
    return f"{project}-{service}-1"


def order(services):
    """The services, each after the ones it depends on."""
    done, out = set(), []

    def visit(name, path):
        need(name in services, f"depends_on names {name}, which is not a service")
        need(name not in path, f"depends_on loops: {' -> '.join(path + [name])}")
        if name in done:
            return
        for dep in services[name].get("depends_on") or {}:
            visit(dep, path + [name])
        done.add(name)
        out.append(name)
    for name in services:
        visit(name, [])
    return out


def run_args(doc, project, name, svc, base_dir):
    args = ["run", "--detach", "--name", container_name(project, name),
            "--label", f"com.docker.compose.project={project}",
            "--label", f"com.docker.compose.service={name}",
            "--network", f"{project}_default", "--network-alias", name]
    for v in svc.get("volumes") or []:
        source, target, *mode = v.split(":")
        if source.startswith((".", "/")):
            source = os.path.normpath(os.path.join(base_dir, source))
            if not os.path.exists(source):
                fail(f"services.{name}.volumes: {source} does not exist")
        else:
            source = f"{project}_{source}"
        args += ["--volume", ":".join([source, target, *mode])]
    for p in svc.get("ports") or []:
        args += ["--publish", p]
    for k, v in (svc.get("environment") or {}).items():
        args += ["--env", f"{k}={v}"]
    hc = svc.get("healthcheck")
    if hc:
        test = hc["test"]
        cmd = json.dumps(test[1:]) if test[0] == "CMD" else test[1]
        args += ["--health-cmd", cmd]
        for key, flag in (("interval", "--health-interval"), ("timeout", "--health-timeout"),
                          ("start_period", "--health-start-period")):
            if key in hc:
                args += [flag, f"{seconds(hc[key], f'services.{name}.healthcheck.{key}'):g}s"]
        if "retries" in hc:
            args += ["--health-retries", str(hc["retries"])]
    if svc.get("init"):
        args.append("--init")
    for cap in svc.get("cap_drop") or []:
        args += ["--cap-drop", cap]
    for opt in svc.get("security_opt") or []:
        # compose writes no-new-privileges:true; podman takes no-new-privileges
        args += ["--security-opt", "no-new-privileges" if opt == "no-new-privileges:true" else opt]
    if "restart" in svc:
        args += ["--restart", str(svc["restart"])]
    if "stop_grace_period" in svc:
        grace = seconds(svc["stop_grace_period"], f"services.{name}.stop_grace_period")
        args += ["--stop-timeout", str(math.ceil(grace))]
    args.append(svc["image"])
    return args


def wait_healthy(project, name, svc):
    """Runs the service's health check until it passes, as long as Docker would wait."""
    hc = svc.get("healthcheck")
    if not hc:
        fail(f"a service waits for {name} to be healthy, but {name} has no healthcheck")
    w = f"services.{name}.healthcheck"
    budget = (seconds(hc.get("start_period", "0s"), w) +
              seconds(hc.get("interval", "30s"), w) * int(hc.get("retries", 3)))
    deadline = time.monotonic() + budget
    c = container_name(project, name)
    while True:
        r = podman("healthcheck", "run", c, check=False, capture=True)
        if r.returncode == 0:
            return
        state = podman("inspect", "--format", "{{.State.Status}}", c, capture=True,
                       check=False).stdout.strip()
        if state != "running":
            fail(f"{c} is {state or 'gone'} while waiting for it to be healthy; "
                 f"see podman logs {c}")
        if time.monotonic() > deadline:
            fail(f"{c} is not healthy after {budget:g} s (start_period + interval * retries); "
                 f"see podman logs {c}")
        time.sleep(0.25)  # the pace of the checks, not a wait for anything


def up(doc, project, base_dir):
    services = doc["services"]
    names = order(services)
    for name in names:
        image = services[name]["image"]
        if podman("image", "exists", image, check=False).returncode != 0:
            fail(f"image {image} (services.{name}) is missing; scripts/container.sh build "
                 f"builds it")
    net = f"{project}_default"
    if podman("network", "exists", net, check=False).returncode != 0:
        podman("network", "create", "--label", f"com.docker.compose.project={project}", net,
               capture=True)
    for vol in doc.get("volumes") or {}:
        full = f"{project}_{vol}"
        if podman("volume", "exists", full, check=False).returncode != 0:
            podman("volume", "create", "--label", f"com.docker.compose.project={project}", full,
                   capture=True)
    for name in names:
        c = container_name(project, name)
        if podman("container", "exists", c, check=False).returncode == 0:
            fail(f"container {c} exists already: take project {project} down first "
                 f"(scripts/container.sh down)")
    for name in names:
        svc = services[name]
        for dep, spec in (svc.get("depends_on") or {}).items():
            if (spec or {}).get("condition") == "service_healthy":
                wait_healthy(project, dep, services[dep])
        podman(*run_args(doc, project, name, svc, base_dir), capture=True)
        print(container_name(project, name))


def down(doc, project, volumes):
    services = doc["services"]
    for name in reversed(order(services)):
        c = container_name(project, name)
        if podman("container", "exists", c, check=False).returncode != 0:
            continue
        grace = seconds(services[name].get("stop_grace_period", "10s"), "stop_grace_period")
        podman("stop", "--time", str(math.ceil(grace)), c, capture=True)
        podman("rm", "--force", c, capture=True)
    net = f"{project}_default"
    if podman("network", "exists", net, check=False).returncode == 0:
        podman("network", "rm", net, capture=True)
    if volumes:
        for vol in doc.get("volumes") or {}:
            full = f"{project}_{vol}"
            if podman("volume", "exists", full, check=False).returncode == 0:
                podman("volume", "rm", full, capture=True)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-f", "--file", action="append",
                    help="the compose file, then override files (default docker/compose.yaml)")
    ap.add_argument("-p", "--project")
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("images")
    sub.add_parser("up")
    d = sub.add_parser("down")
    d.add_argument("-v", "--volumes", action="store_true")
    c = sub.add_parser("container")
    c.add_argument("service")
    sub.add_parser("config")
    args = ap.parse_args()
    paths = [os.path.abspath(f) for f in
             args.file or [os.path.join(os.path.dirname(here), "docker", "compose.yaml")]]
    path = paths[0]
    base_dir = os.path.dirname(path)
    try:
        doc = load(paths)
        project = args.project or doc.get("name")
        need(isinstance(project, str) and re.fullmatch(r"[a-z0-9][a-z0-9_-]*", project or ""),
             "the project name (top-level name, or -p) must be lower case letters, digits, - "
             "and _")
        if args.command == "images":
            for name, svc in doc["services"].items():
                b = svc.get("build")
                if b is not None:
                    ctx = os.path.normpath(os.path.join(base_dir, b.get("context", ".")))
                    print(f"{svc['image']}\t{ctx}\t{os.path.join(ctx, b.get('dockerfile', 'Dockerfile'))}")
        elif args.command == "up":
            up(doc, project, base_dir)
        elif args.command == "down":
            down(doc, project, args.volumes)
        elif args.command == "container":
            need(args.service in doc["services"], f"no service {args.service}")
            print(container_name(project, args.service))
        elif args.command == "config":
            print(json.dumps(doc, indent=2))
    except Refused as e:
        print(f"compose-podman: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
