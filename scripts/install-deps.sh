#!/usr/bin/env bash
# Installs the Debian 12 packages Hachi needs to build, test and benchmark.
# Idempotent: does nothing when every package is already installed. Only Debian's own
# archive is used. Why each package is there: docs/dependencies.md.
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build              # toolchain
  nlohmann-json3-dev                             # JSON: topology files, --json output
  libtomlplusplus-dev                            # TOML: the cluster config (src/config/)
  libsqlite3-dev                                 # the server's state (src/state/)
  libpq-dev postgresql-15                        # the PostgreSQL store (libpq's header; libpq5 by dlopen) and the server its tests start
  libssl-dev openssl                             # TLS (headers; libssl3 opened at run time); tests' certs
  libgtest-dev libgmock-dev                      # unit and table-driven tests
  librapidcheck-dev                              # property tests
  libbenchmark-dev                               # make bench
  clang-14 libclang-rt-14-dev                    # libFuzzer target (make fuzz)
  clang-format                                   # make format-check (Debian 12: 14.0.6)
  ccache                                         # a fresh clone reuses an earlier clone's objects (CMakeLists.txt)
  python3                                        # make analyze reads compile_commands.json; fleet tests' rank programs
  iproute2                                       # `ip netns`: the fleet and partition tests' simulated hosts
  faketime                                       # libfaketime: an agent whose wall clock is an hour off (cli/faults_e2e_test.cc)
  prometheus                                     # promtool checks the metrics scrape (server/observe_test.cc)
  chromium chromium-driver                       # the dashboard's browser tests (tests/browser)
  snakemake                                      # its --slurm executor drives the Slurm names (tests/slurm)
  help2man                                       # the man pages, from --help (packaging/man.sh)
  dpkg-dev file                                  # make package: CPack's dpkg-shlibdeps, which finds binaries with file
  systemd                                        # package-test: systemd-analyze verify, sysusers and tmpfiles for postinst
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
# Node.js runs the browser tests (npm ci --prefix tests/browser); any node on the PATH
# will do (the machine's own node 20 is not Debian's package).
command -v node >/dev/null 2>&1 || missing+=(nodejs npm)
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
