#!/usr/bin/env bash
# Install rmq as systemd services on a current distribution (Debian 12 and
# others that refuse `sudo pip install` under PEP 668): a virtual environment
# in /opt/rmq that owns the Python packages, the unit files, the rmq account,
# /etc/rmq, and the documentation the units' Documentation= lines point at.
#
#   sudo systemd/install.sh            # from a checkout, or with RMQ_SOURCE=path|wheel
#   sudo systemctl enable --now rmq-namesrv rmq-broker@broker-a
#
# Settings (environment): PREFIX (/opt/rmq), DESTDIR (stage into a directory
# instead of the live system; nothing is activated then), RMQ_SOURCE (what pip
# installs: this checkout by default, or a built wheel), PYTHON (python3).
# Running it again upgrades the package and the units; /etc/rmq files that
# exist are kept.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
src="${RMQ_SOURCE:-$(dirname "$here")}"
prefix="${PREFIX:-/opt/rmq}"
dest="${DESTDIR:-}"
python="${PYTHON:-python3}"

say() { printf 'rmq install: %s\n' "$*"; }

if [ -z "$dest" ] && [ "$(id -u)" -ne 0 ]; then
  say "run as root (or set DESTDIR to stage the files)" >&2
  exit 1
fi
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
  say "$python is older than 3.11" >&2; exit 1; }

say "virtual environment $dest$prefix"
"$python" -m venv "$dest$prefix"
"$dest$prefix/bin/pip" install -q --upgrade pip
"$dest$prefix/bin/pip" install -q --upgrade "$src"

say "units, account, directories and documentation"
install -d "$dest/etc/systemd/system" "$dest/usr/lib/sysusers.d" "$dest/usr/lib/tmpfiles.d" \
  "$dest/usr/share/doc/rmq" "$dest/etc/rmq"
for unit in rmq-namesrv.service rmq-broker@.service rmq-dashboard.service; do
  sed "s#/opt/rmq/#$prefix/#g" "$here/$unit" > "$dest/etc/systemd/system/$unit"
  chmod 644 "$dest/etc/systemd/system/$unit"
done
install -m 644 "$here/rmq.sysusers.conf" "$dest/usr/lib/sysusers.d/rmq.conf"
install -m 644 "$here/rmq.tmpfiles.conf" "$dest/usr/lib/tmpfiles.d/rmq.conf"
docs="$(dirname "$here")/docs"
if [ -d "$docs" ]; then
  install -m 644 "$docs"/*.md "$dest/usr/share/doc/rmq/"
fi
conf="$(dirname "$here")/conf"
if [ -f "$conf/namesrv.conf" ] && [ ! -e "$dest/etc/rmq/namesrv.conf" ]; then
  install -m 644 "$conf/namesrv.conf" "$dest/etc/rmq/namesrv.conf"
fi
if [ -f "$conf/broker.conf" ] && [ ! -e "$dest/etc/rmq/broker-a.conf" ]; then
  { cat "$conf/broker.conf"
    printf '\n# ---- set by systemd/install.sh ------------------------------------------\n'
    printf 'namesrvAddr=127.0.0.1:9876\nstorePathRootDir=/var/lib/rmq/store-broker-a\n'
  } > "$dest/etc/rmq/broker-a.conf"
  chmod 644 "$dest/etc/rmq/broker-a.conf"
fi

# the three-node DLedger group of conf/dledger, as instances dledger-n0..n2
for node in n0 n1 n2; do
  if [ -f "$conf/dledger/broker-$node.conf" ] && [ ! -e "$dest/etc/rmq/dledger-$node.conf" ]; then
    { cat "$conf/dledger/broker-$node.conf"
      printf '\n# ---- set by systemd/install.sh ------------------------------------------\n'
      printf 'storePathRootDir=/var/lib/rmq/store-dledger-%s\n' "$node"
      printf 'storePathCommitLog=/var/lib/rmq/store-dledger-%s/commitlog\n' "$node"
    } > "$dest/etc/rmq/dledger-$node.conf"
    chmod 644 "$dest/etc/rmq/dledger-$node.conf"
  fi
done

if [ -n "$dest" ]; then
  say "staged in $dest (nothing activated)"
  exit 0
fi
systemd-sysusers /usr/lib/sysusers.d/rmq.conf
systemd-tmpfiles --create /usr/lib/tmpfiles.d/rmq.conf
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload
fi
say "done: put broker configs in /etc/rmq (e.g. broker-a.conf), then"
say "  systemctl enable --now rmq-namesrv rmq-broker@broker-a"
say "or a DLedger group: systemctl enable --now rmq-broker@dledger-n0 rmq-broker@dledger-n1 rmq-broker@dledger-n2"
