# Sourced by scripts/install-*: one way to ask whether a Debian package is installed and to install
# the missing ones (only those, so a second run is instant), and the choice of this distribution's
# package for each of scripts/apt-packages.txt's Debian 12 names (postgresql-15 is postgresql-16 on
# Ubuntu 24.04, linux-source-6.1 is linux-source-6.8.0).

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

APT_UPDATED=""  # set once this process has run `apt-get update`
apt_update() {
    [[ -n $APT_UPDATED ]] && return 0
    apt-get update -qq
    APT_UPDATED=1
}

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
    apt_update
    # --no-install-recommends: linux-perf and friends otherwise drag in unrelated upgrades.
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# What the installer may go without: the workload that needs it is left out of `make bench` where it is
# absent (the Makefile asks for exim only where /usr/sbin/exim4 is), so a missing one is said, not fatal.
# Ubuntu has Chromium only as a snap: there mosbench serve's browser tests skip, saying why.
declare -A APT_SKIPPABLE=([exim4-daemon-light]="the exim workload will be unavailable"
    [chromium]="mosbench serve's browser tests will be skipped"
    [chromium-driver]="mosbench serve's browser tests will be skipped")

# A versioned name stands for its family: the stem, then a version (postgresql-15, linux-source-6.1).
APT_VERSIONED='^(.+-)([0-9]+(\.[0-9]+)*)$'

# _apt_fits NAME: whether a member of a family will do. postgresql-N must ship a pgbench whose counts
# mosbench reads: pgbench is in the server package postgresql-N itself from PostgreSQL 10 on (Debian's and
# Ubuntu's debian/postgresql-N.install; up to 9.6 it was in postgresql-contrib-9.x), and mosbench reads the
# failed-transaction counts of pgbench 15 on (mosbench/workloads/postgres/pgbench.py's MIN_MAJOR).
APT_PG_MIN=15
_apt_fits() {
    [[ $1 =~ ^postgresql-([0-9]+)(\.[0-9]+)?$ ]] || return 0
    ((BASH_REMATCH[1] >= APT_PG_MIN))
}

# _apt_why NAME KERNEL: the one line for a NAME this distribution has no counterpart of.
_apt_why() {
    local name=$1 kernel=$2
    local line="mosbench: this distribution has no"
    case $name in
    postgresql-[0-9]*)
        line+=" postgresql-N, N >= $APT_PG_MIN (Debian 12: $name): the postgres workload needs its server, psql and pgbench" ;;
    linux-source-[0-9]*)
        line+=" linux-source-X.Y (Debian 12: $name): psearchy's corpus and gmake's kernel tree are its tarball" ;;
    linux-perf)
        line+=" linux-perf, nor linux-tools-$kernel (perf for the running kernel $kernel): \`make bench\` profiles with perf" ;;
    *)
        if [[ $name =~ $APT_VERSIONED ]]; then
            line+=" ${BASH_REMATCH[1]}N (Debian 12: $name)"
        else
            line+=" $name"
        fi
        if [[ -n ${APT_SKIPPABLE[$name]-} ]]; then
            line+=": ${APT_SKIPPABLE[$name]}"
        else
            line+=" (scripts/apt-packages.txt says what needs it)"
        fi ;;
    esac
    echo "$line"
}

# choose_packages AVAILABLE INSTALLED KERNEL PERF_WORKS NAME...: this distribution's package(s) for each
# NAME of scripts/apt-packages.txt (Debian 12's names), one a line on stdout in NAME's order. AVAILABLE
# holds the names apt knows, as `apt-cache pkgnames` prints them; INSTALLED the installed packages, one a
# line; KERNEL is `uname -r`; PERF_WORKS is 1 where a perf runs already (one built by hand), else 0.
#   A versioned NAME (postgresql-15, linux-source-6.1) is itself wherever the distribution has it (so
# Debian 12 keeps Debian 12's, even with linux-source-6.12 beside it in bookworm-security); elsewhere
# the newest of its family that is installed, else the newest the distribution has (for postgresql-N:
# one whose pgbench mosbench reads, _apt_fits). linux-perf is Debian's; Ubuntu packages perf per kernel, as linux-tools-KERNEL
# (its /usr/bin/perf, in linux-tools-common, runs the one for the running kernel). Any other NAME is
# itself. For a NAME with no counterpart, one line on stderr; status 1 unless every such NAME is
# skippable (APT_SKIPPABLE).
choose_packages() {
    local available=$1 installed_list=$2 kernel=$3 perf_works=$4
    shift 4
    local name re="linux-tools-common"
    for name; do  # each family, as an ERE ([.] and [+]: awk -v would eat backslashes)
        [[ $name =~ $APT_VERSIONED ]] && re+="|$(sed 's/[.+]/[&]/g' <<<"${BASH_REMATCH[1]}")[0-9]+([.][0-9]+)*"
    done
    re="^($re)\$"
    # Only the names that can matter: AVAILABLE is every name apt knows (tens of thousands).
    local -A _apt_have=() inst=()
    local -a family_inst=() family_all=()
    while IFS= read -r name; do
        _apt_have[$name]=1
    done < <(awk -v names="$* linux-tools-$kernel" -v re="$re" \
        'BEGIN { n = split(names, w, " "); for (i = 1; i <= n; i++) keep[w[i]] = 1 }
         ($0 in keep) || $0 ~ re' "$available" "$installed_list")
    while IFS= read -r name; do
        [[ -n $name ]] && inst[$name]=1
    done <"$installed_list"
    local status=0 stem c found
    for name; do
        if [[ $name =~ $APT_VERSIONED ]]; then
            stem=${BASH_REMATCH[1]}
            family_inst=() family_all=()
            for c in "${!_apt_have[@]}"; do
                [[ $c == "$stem"* && ${c#"$stem"} =~ ^[0-9]+(\.[0-9]+)*$ ]] || continue
                family_all+=("$c")
                [[ -n ${inst[$c]-} ]] && family_inst+=("$c")
            done
            found=""
            for c in "$name" $(printf '%s\n' "${family_inst[@]}" | sort -rV) \
                $(printf '%s\n' "${family_all[@]}" | sort -rV); do
                [[ -n ${_apt_have[$c]-} ]] && _apt_fits "$c" || continue
                echo "$c"
                found=1
                break
            done
            [[ -n $found ]] && continue
        elif [[ -n ${_apt_have[$name]-} ]]; then
            echo "$name"
            continue
        elif [[ $name == linux-perf ]]; then
            if [[ -n ${_apt_have[linux-tools-$kernel]-} ]]; then
                [[ -z ${_apt_have[linux-tools-common]-} ]] || echo linux-tools-common
                echo "linux-tools-$kernel"
                continue
            fi
            [[ $perf_works == 1 ]] && continue
        fi
        _apt_why "$name" "$kernel" >&2
        [[ -n ${APT_SKIPPABLE[$name]-} ]] || status=1
    done
    return "$status"
}

# distribution_packages NAME...: sets APT_CHOSEN to this machine's packages for the NAMEs (as
# choose_packages chooses them); status 1, with a line per NAME that has none, where one is wanting.
# Where every NAME is installed it asks apt nothing (the second run stays instant).
APT_CHOSEN=()
distribution_packages() {
    local -A inst=()
    local name tmp status=0 kernel perf_works=0
    tmp=$(mktemp -d)
    dpkg-query -W -f='${Package} ${Status}\n' 2>/dev/null \
        | awk '$2 == "install" && $4 == "installed" { print $1 }' >"$tmp/installed"
    while IFS= read -r name; do inst[$name]=1; done <"$tmp/installed"
    APT_CHOSEN=("$@")
    for name; do
        [[ -n ${inst[$name]-} ]] || { status=2; break; }
    done
    if ((status == 0)); then
        rm -rf "$tmp"
        return 0
    fi
    kernel=$(uname -r)
    perf --version >/dev/null 2>&1 && perf_works=1
    apt-cache pkgnames >"$tmp/available" 2>/dev/null || true
    status=0
    choose_packages "$tmp/available" "$tmp/installed" "$kernel" "$perf_works" "$@" >"$tmp/chosen" 2>"$tmp/why" \
        || status=$?
    if [[ -s $tmp/why && $(id -u) -eq 0 && -z $APT_UPDATED ]]; then
        # The lists may be older than the distribution, or absent (a container's): once more after an update.
        export DEBIAN_FRONTEND=noninteractive
        apt_update
        apt-cache pkgnames >"$tmp/available" 2>/dev/null || true
        status=0
        choose_packages "$tmp/available" "$tmp/installed" "$kernel" "$perf_works" "$@" >"$tmp/chosen" 2>"$tmp/why" \
            || status=$?
    fi
    cat "$tmp/why" >&2
    if ((status)) && [[ $(id -u) -ne 0 ]]; then
        echo "mosbench: (the package lists may be out of date: as root, scripts/install-deps updates them first)" >&2
    fi
    mapfile -t APT_CHOSEN <"$tmp/chosen"
    rm -rf "$tmp"
    return "$status"
}
