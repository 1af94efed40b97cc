#!/usr/bin/env bash
# The container image for real, with podman: builds docker/Dockerfile and the compose files'
# broker and balancer, runs the services of docker/compose.yaml or docker/compose.replicas.yaml,
# and runs the container test tier.
#
#   scripts/container.sh setup         install podman & co (apt), write the containers.conf,
#                                      make the pinned Debian base image if it is missing
#   scripts/container.sh build         setup, then build every image the compose files build
#                                      (podman build --pull=never, layers cached between runs)
#   scripts/container.sh up [--replicas] [PROJECT]   build, then start compose.yaml's services
#                                      (--replicas: compose.replicas.yaml's; PROJECT defaults
#                                      to the file's name, mcp-mqtt-bridge[-replicas])
#   scripts/container.sh down [--replicas] [PROJECT]   stop and remove them, keeping the
#                                      named volumes
#   scripts/container.sh test [TIER…]  build, then the container test tier: tests/deploy/
#                                      container.test.mjs (compose.yaml) and replicas.test.mjs
#                                      (compose.replicas.yaml); TIER container or replicas runs
#                                      only that file
#   scripts/container.sh podman ARGS…  podman with this script's containers.conf
#                                      (e.g. `podman logs mcp-mqtt-bridge-bridge-1`)
#
# Run as root: podman runs rootful, and apt-get installs what is missing. Nothing comes from a
# container registry: the Dockerfile's base, debian:bookworm-YYYYMMDD, is made locally by
# debootstrap from this machine's Debian mirror (an image of the same release, with today's
# packages rather than those of that date) and kept in podman's storage, as are the build's
# layers, so later runs reuse them. BRIDGE_PORT picks the host port MCP clients use (the
# bridge's in compose.yaml, HAProxy's in compose.replicas.yaml).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
state="$root/build-container"
compose_files=("$root/docker/compose.yaml")
replicas_files=("$root/docker/compose.replicas.yaml")
# A host that trusts CAs of its own (a TLS-inspecting proxy's) gives the bridge its CA bundle, so
# that npx in the container reaches the npm registry as the host does (see the override file; in
# compose.replicas.yaml the bridge is the egress, which runs npx).
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  compose_files+=("$root/docker/compose.host-ca.yaml")
  replicas_files+=("$root/docker/compose.host-ca.yaml")
fi
compose_cmd() {  # compose_cmd FILE… : the runner with those files
  local f
  compose=(/usr/bin/python3 "$root/scripts/compose-podman.py")
  for f in "$@"; do compose+=(-f "$f"); done
}
compose_cmd "${compose_files[@]}"
# The tier's own projects, apart from one a developer may have up (mcp-mqtt-bridge[-replicas]).
test_project="mcpmqtt-test"
replicas_project="mcpmqtt-replicas-test"
lockdir="${TMPDIR:-/tmp}"

say() { echo "container.sh: $*" >&2; }
die() { say "$*"; exit 1; }

usage() {
  sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# ---- setup --------------------------------------------------------------------------------------

write_conf() {
  mkdir -p "$state"
  # Containers may not ask for more than the machine's hard limits (runc fails to start them
  # otherwise): 65536 open files as the README advises, or less where the machine allows less.
  local nofile nproc
  nofile=$(ulimit -Hn); [[ $nofile == unlimited || $nofile -gt 65536 ]] && nofile=65536
  nproc=$(ulimit -Hu); [[ $nproc == unlimited || $nproc -gt 32768 ]] && nproc=32768
  {
    echo "# Written by scripts/container.sh; CONTAINERS_CONF points podman here."
    echo "[containers]"
    echo "default_ulimits = [\"nofile=$nofile:$nofile\", \"nproc=$nproc:$nproc\"]"
    echo "[engine]"
    # crun refuses the cgroup setup of some machines; runc works on all of them.
    echo "runtime = \"runc\""
    # This file replaces Debian's, and with it the helper directory (netavark, aardvark-dns).
    echo "helper_binaries_dir = [\"/usr/lib/podman\", \"/usr/libexec/podman\"]"
    if [[ ! -d /run/systemd/system ]]; then
      # No systemd as PID 1 (a container, a CI sandbox): no systemd cgroups and no journal.
      echo "cgroup_manager = \"cgroupfs\""
      echo "events_logger = \"file\""
    fi
    echo "[network]"
    echo "network_backend = \"netavark\""
  } >"$state/containers.conf.new"
  mv "$state/containers.conf.new" "$state/containers.conf"
  export CONTAINERS_CONF="$state/containers.conf"
}

# The first URI of this machine's apt sources that serves `suite` (deb822 or one-line format).
apt_uri() {
  local suite=$1 uri=""
  shopt -s nullglob
  local deb822=(/etc/apt/sources.list.d/*.sources) oneline=(/etc/apt/sources.list /etc/apt/sources.list.d/*.list)
  shopt -u nullglob
  if (( ${#deb822[@]} )); then
    uri=$(awk -v suite="$suite" 'BEGIN { RS = "" }
      { types = ""; uris = ""; suites = ""
        n = split($0, line, "\n")
        for (i = 1; i <= n; i++) {
          if (line[i] ~ /^Types:/) { types = " " substr(line[i], 7) " " }
          if (line[i] ~ /^URIs:/) { uris = substr(line[i], 6) }
          if (line[i] ~ /^Suites:/) { suites = " " substr(line[i], 8) " " }
        }
        gsub(/[ \t]+/, " ", types); gsub(/[ \t]+/, " ", suites)
        if (types ~ / deb / && index(suites, " " suite " ")) { split(uris, u, " "); print u[1]; exit }
      }' "${deb822[@]}")
  fi
  if [[ -z $uri ]] && (( ${#oneline[@]} )); then
    uri=$(awk -v suite="$suite" '$1 == "deb" {
        i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
        if ($(i + 1) == suite) { print $i; exit } }' "${oneline[@]}" 2>/dev/null || true)
  fi
  echo "$uri"
}

# The one base image the Dockerfiles build on, checked and split into its parts.
base_image() {
  local files=("$root/docker/Dockerfile" "$root/docker/mosquitto.Containerfile"
               "$root/docker/haproxy.Containerfile")
  local bases
  # FROM lines, less those naming an earlier stage (FROM x AS name ... FROM name).
  bases=$(awk 'toupper($1) == "FROM" { img = $2; if (toupper($3) == "AS") stage[$4] = 1
                                       if (!(img in stage)) print img }' "${files[@]}" | sort -u)
  if [[ $(wc -l <<<"$bases") != 1 ]]; then
    die "the Dockerfiles must build on one base image, so that the binary runs with the" \
        "libraries it was linked against; they name: $(echo $bases)"
  fi
  # A dated tag names a fixed image (and tells debootstrap which release to install).
  if [[ ! $bases =~ ^debian:([a-z]+)-[0-9]{8}$ ]]; then
    die "base image $bases: expected debian:SUITE-YYYYMMDD, a release pinned by its dated" \
        "tag (e.g. debian:bookworm-20250520)"
  fi
  base_name="docker.io/library/$bases"
  base_suite="${BASH_REMATCH[1]}"
}

make_base() {
  base_image
  if podman image exists "$base_name"; then
    say "base image $base_name is present"
    return
  fi
  exec 8>"$lockdir/mcpmqtt-container-base.lock"
  flock -w 900 8 || die "gave up waiting for another container.sh making the base image"
  if podman image exists "$base_name"; then return; fi
  local start=$SECONDS mirror security rootfs="$state/rootfs"
  mirror=$(apt_uri "$base_suite"); mirror=${mirror:-http://deb.debian.org/debian}
  security=$(apt_uri "$base_suite-security"); security=${security:-http://deb.debian.org/debian-security}
  say "making $base_name: debootstrap --variant=minbase $base_suite from $mirror"
  rm -rf "$rootfs"
  if ! debootstrap --variant=minbase "$base_suite" "$rootfs" "$mirror" >"$state/debootstrap.log" 2>&1; then
    tail -n 20 "$state/debootstrap.log" >&2
    die "debootstrap failed (whole log: $state/debootstrap.log)"
  fi
  # The sources of Debian's own images, on this machine's mirror; no package lists or
  # downloaded packages in the image.
  rm -f "$rootfs/etc/apt/sources.list"
  cat >"$rootfs/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: $base_suite $base_suite-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: $base_suite-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar --numeric-owner -C "$rootfs" -c . | podman import \
    --change 'CMD ["bash"]' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change "LABEL mcp-mqtt-bridge.base-image=\"debootstrap --variant=minbase $base_suite, $(date -u +%F)\"" \
    - "$base_name" >/dev/null
  rm -rf "$rootfs"
  say "made $base_name in $((SECONDS - start)) s"
}

setup() {
  [[ $(id -u) == 0 ]] || die "run as root: podman runs rootful here and apt-get installs what is missing"
  "$root/scripts/install-deps.sh" --container
  write_conf
  make_base
}

# ---- images and services ------------------------------------------------------------------------

# The machine's ccache directory, lent to the image's build (docker/Dockerfile): the objects the
# test command's release build made serve the image's compiles. Not part of any layer's key.
ccache_args=()
ccache_volume() {
  command -v ccache >/dev/null || return 0
  local dir
  dir=$(ccache --get-config cache_dir 2>/dev/null) || return 0
  [[ -n $dir ]] || return 0
  mkdir -p "$dir"
  ccache_args=(--volume "$dir:/ccache" --build-arg CCACHE_DIR=/ccache)
}

# podman build, its output in a log that is shown when it fails.
build_one() {
  local log="$state/build-$1.log"
  shift
  if ! podman build --pull=never --format docker "${ccache_args[@]}" "$@" >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    die "podman build $* failed (whole log: $log)"
  fi
}

# Every image the compose files build, each once (in compose.replicas.yaml three services build
# the bridge's image, and both files the broker's); fails when two services build one image
# from different Dockerfiles or contexts.
images() {
  local f
  for f in "$root/docker/compose.yaml" "$root/docker/compose.replicas.yaml"; do
    /usr/bin/python3 "$root/scripts/compose-podman.py" -f "$f" images || return 1
  done | awk -F'\t' '$1 in seen { if (seen[$1] != $0) { print "container.sh: " $1 " is built two ways" > "/dev/stderr"; bad = 1 }; next }
                      { seen[$1] = $0; print }
                      END { exit bad }'
}

build() {
  setup
  ccache_volume
  local image context file start stage list
  list=$(images)
  while IFS=$'\t' read -r image context file; do
    start=$SECONDS
    say "building $image ($(realpath --relative-to="$root" "$file"))"
    # Each named stage (the compiler's) first, under a tag of its own: a tagged image keeps the
    # layers below it, so the prune below leaves what the next build reuses (its apt layer) and
    # takes only what a rebuild replaced. The image itself then reuses those layers.
    for stage in $(awk 'toupper($1) == "FROM" && toupper($3) == "AS" { print $4 }' "$file"); do
      build_one "${image%%:*}-$stage" --target "$stage" -f "$file" \
        -t "${image%%:*}-stage-$stage:${image##*:}" "$context"
    done
    # --format docker keeps HEALTHCHECK in the image, as docker build does (OCI images have
    # no field for it).
    build_one "${image%%:*}" -f "$file" -t "$image" "$context"
    say "built $image in $((SECONDS - start)) s"
  done <<<"$list"
  # Untagged images no container uses: what the rebuilds replaced (each would keep about 2 GB).
  # A build container another build left behind (an interrupted one) still holds its image:
  # that is no reason to fail the tier, only to keep the image until the next prune.
  podman image prune --force >/dev/null ||
    say "podman image prune left some images in place (in use by a build container)"
}

# One test file against its compose project: run_file NAME PROJECT FILE…
run_file() {
  local name=$1 project=$2 start=$SECONDS status=0
  shift 2
  say "running tests/deploy/$name.test.mjs (project $project;" \
      "compose files: $(printf '%s ' "${@#"$root/"}"))"
  # BRIDGE_PORT set and empty: the compose file publishes its port on any free port of 127.0.0.1.
  BRIDGE_PORT="" MCPMQTT_CONTAINER_PROJECT="$project" \
    MCPMQTT_CONTAINER_COMPOSE="$(printf '%s\n' "$@")" \
    "$node" --test --test-reporter=spec "$root/tests/deploy/$name.test.mjs" || status=$?
  say "$name.test.mjs: $((SECONDS - start)) s, status $status"
  return $status
}

run_tier() {
  local tiers=("$@") tier
  (( ${#tiers[@]} )) || tiers=(container replicas)
  for tier in "${tiers[@]}"; do
    [[ $tier == container || $tier == replicas ]] ||
      die "unknown test tier '$tier': container or replicas"
  done
  exec 7>"$lockdir/mcpmqtt-container-test.lock"
  flock -w 1800 7 || die "gave up waiting for another container test tier on this machine"
  local start=$SECONDS status=0 node
  build
  local built=$((SECONDS - start))
  node=$("$root/scripts/setup-node.sh")
  # One after the other: each runs its own services, and the machine's two cores are enough for
  # one set of them.
  for tier in "${tiers[@]}"; do
    case "$tier" in
      container) run_file container "$test_project" "${compose_files[@]}" || status=1 ;;
      replicas) run_file replicas "$replicas_project" "${replicas_files[@]}" || status=1 ;;
    esac
  done
  say "container tier: images $built s, tests $((SECONDS - start - built)) s, status $status"
  return $status
}

cmd="${1:-}"
[[ $# -gt 0 ]] && shift
case "$cmd" in
  setup) setup ;;
  build) build ;;
  up|down)
    # The container MCP clients reach: compose.yaml's bridge, or compose.replicas.yaml's HAProxy.
    front_service=bridge
    if [[ ${1:-} == --replicas ]]; then
      shift
      compose_cmd "${replicas_files[@]}"
      front_service=haproxy
    fi
    if [[ $cmd == down ]]; then
      [[ $(id -u) == 0 ]] || die "run as root"
      write_conf
      "${compose[@]}" ${1:+-p "$1"} down
      exit
    fi
    if [[ $front_service == haproxy && ! -f $root/docker/replica.secret ]]; then
      die "docker/replica.secret is missing: the replicas' shared secret, made once with" \
          "head -c 48 /dev/urandom | base64 > docker/replica.secret"
    fi
    build
    containers=$("${compose[@]}" ${1:+-p "$1"} up)
    echo "$containers"
    front=$(grep -e "-$front_service-1\$" <<<"$containers" || true)
    if [[ -n $front ]]; then
      say "MCP clients on this host: http://$(podman port "$front" 8080/tcp)/mcp"
    fi
    ;;
  test) run_tier "$@" ;;
  podman)
    write_conf
    exec podman "$@"
    ;;
  -h|--help|"") usage ;;
  *) say "unknown command '$cmd'"; usage ;;
esac
