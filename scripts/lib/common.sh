# Shared by scripts/demo, scripts/test and scripts/bench: package checks and build presets.
# Sourced, not run.

# require_packages PKG...: every Debian package must be installed. As root the missing ones are
# installed with apt-get; otherwise the exact apt-get line is printed and the script stops.
require_packages() {
  local missing=()
  for p in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local line="apt-get install -y --no-install-recommends ${missing[*]}"
  if [ "$(id -u)" -eq 0 ]; then
    echo "fuse: installing missing packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # A fresh machine may have empty package lists.
    apt-get update -qq || true
    $line
  else
    echo "fuse: missing Debian packages. Run as root:"
    echo "  sudo apt-get update && sudo $line"
    exit 1
  fi
}

# Packages every build needs.
FUSE_BASE_PACKAGES=(cmake g++ make ninja-build libeigen3-dev libxsimd-dev doctest-dev nlohmann-json3-dev)

# jobs: how many compile jobs this machine takes without running out of memory (each
# translation unit of the tests takes ~1.5 GB at most).
fuse_jobs() {
  local cpus mem_gb by_mem
  cpus=$(nproc 2>/dev/null || echo 2)
  mem_gb=$(awk '/MemTotal/ {printf "%d", $2 / 1048576}' /proc/meminfo 2>/dev/null || echo 4)
  by_mem=$(( mem_gb / 2 ))
  [ "$by_mem" -lt 1 ] && by_mem=1
  [ "$cpus" -lt "$by_mem" ] && echo "$cpus" || echo "$by_mem"
}
