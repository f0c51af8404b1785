# Sourced by scripts/install-*: one way to ask whether a Debian package is installed and to install
# the missing ones (only those, so a second run is instant).

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

# install_missing WHAT PACKAGE...: installs the packages that are not yet installed; WHAT says what
# they are for in the messages. Refuses with one line when not root.
install_missing() {
    local what=$1 pkg
    shift
    local missing=()
    for pkg in "$@"; do
        installed "$pkg" || missing+=("$pkg")
    done
    ((${#missing[@]})) || return 0
    if [[ $(id -u) -ne 0 ]]; then
        echo "mosbench: missing Debian packages$what: ${missing[*]} (run as root, or install them)" >&2
        exit 1
    fi
    echo "mosbench: installing Debian packages$what: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # --no-install-recommends: linux-perf and friends otherwise drag in unrelated upgrades.
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
