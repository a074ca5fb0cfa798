#!/usr/bin/env bash
# Writes the man pages from the binary's own --help texts, with help2man:
#   hachi.1.gz    `hachi --help` (synopsis, options) and a COMMANDS section holding each
#                 command's --help, and each of their subcommands' (hachi topo show ...)
#   sbatch.1.gz, squeue.1.gz, ...   `NAME --help` of each Slurm name the binary answers
#                 to, run through a link of that name (the hachi-slurm-compat package)
# Usage: packaging/man.sh HACHI OUT_DIR VERSION. Deterministic: the same binary gives the
# same bytes (gzip -n, the date from SOURCE_DATE_EPOCH when set, else the version's).
set -euo pipefail
hachi=$(realpath "$1")
out=$2
version=$3
command -v help2man >/dev/null || { echo "man.sh: help2man is missing (scripts/install-deps.sh)" >&2; exit 1; }
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# help2man dates the page; a fixed date keeps rebuilt packages identical.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(date -d 2025-01-01 +%s)}

# Subcommand names from a CLI11 help text: the words at the start of the lines under
# "Subcommands:" (or "SUBCOMMANDS:"), up to the next blank line.
subcommands() {
  awk 'tolower($0) ~ /^subcommands:/ {on = 1; next}
       on && NF == 0 {on = 0}
       on && $1 !~ /^-/ {print $1}' <<<"$1"
}

# A help text as a roff block: no fill, backslashes escaped, no line taken for a request.
roff_block() {
  printf '.nf\n'
  sed -e 's/\\/\\e/g' -e "s/^\([.']\)/\\\\\&\1/"
  printf '.fi\n'
}

{
  printf '[NAME]\nhachi \\- a job scheduler for clusters of 8-GPU servers\n'
  printf '[COMMANDS]\n'
  printf 'Each command has its own options; \\fBhachi COMMAND \\-\\-help\\fR prints them.\n'
  top=$("$hachi" --help 2>&1)
  # submit and run parse their own flags (cli/directives.h): named here in case the CLI's
  # list ever leaves them out.
  for c in $( (subcommands "$top"; echo submit; echo run) | awk '!seen[$0]++'); do
    text=$("$hachi" "$c" --help 2>&1) || true
    [ -n "$text" ] || continue
    printf '.SS "hachi %s"\n' "$c"
    roff_block <<<"$text"
    for s in $(subcommands "$text"); do
      sub=$("$hachi" "$c" "$s" --help 2>&1) || true
      printf '.SS "hachi %s %s"\n' "$c" "$s"
      roff_block <<<"$sub"
    done
  done
  cat <<'ROFF'
[SLURM NAMES]
With the hachi\-slurm\-compat package, \fBsbatch\fR, \fBsqueue\fR, \fBscancel\fR,
\fBsinfo\fR, \fBsacct\fR, \fBscontrol\fR, \fBsrun\fR, \fBsalloc\fR, \fBseff\fR,
\fBsshare\fR, \fBsprio\fR, \fBsacctmgr\fR, \fBsstat\fR, \fBsreport\fR and \fBsattach\fR are links to
this binary, which behaves as that Slurm command when invoked by its name
(\fBhachi slurm install\-links DIR\fR makes the same links by hand).
[ENVIRONMENT]
.TP
.B HACHI_SERVER
The server: http://HOST:PORT, https://HOST:PORT or unix:PATH. Without it and
\-\-server, the local socket /run/hachi/hachi.sock, /var/lib/hachi/hachi.sock or
~/.hachi/dev/hachi.sock, else http://127.0.0.1:8686.
.TP
.B HACHI_TOKEN, HACHI_TOKEN_FILE
A token for a server reached over TCP (\fBhachi token create\fR); the file defaults
to ~/.config/hachi/token.
.TP
.B HACHI_CA_CERT
The CA certificate of an https:// server.
.TP
.B HACHI_CLUSTER_SECRET_FILE
The cluster secret of \fBhachi agent\fR (default /var/lib/hachi/cluster\-secret).
[FILES]
.TP
.I /etc/hachi/hachi.toml
The cluster's policy, read by hachi\-server.service.
.TP
.I /etc/default/hachi\-server, /etc/default/hachi\-agent
The environment of the two units (extra flags, the agent's server and secret).
.TP
.I /var/lib/hachi
The server's state (0700, user hachi): hachi.db, the lock, cluster\-secret.
.TP
.I /run/hachi/hachi.sock
The packaged server's Unix socket: local users need no token there.
.TP
.I /var/spool/hachi
The agent's job scripts and exit files.
[SEE ALSO]
/usr/share/doc/hachi/docs/install.md (installing, units, first job),
/usr/share/doc/hachi/docs/cli.md (every command), /usr/share/doc/hachi/docs/api.md.
ROFF
} >"$work/hachi.h2m"

help2man --no-info --no-discard-stderr --version-string="$version" \
  --name="a job scheduler for clusters of 8-GPU servers" --section=1 \
  --include="$work/hachi.h2m" --output="$work/hachi.1" "$hachi"
gzip -9n <"$work/hachi.1" >"$out/hachi.1.gz"

# The Slurm names (cli/slurm/slurm_cmds.h kSlurmNames): each --help through a link.
mkdir "$work/bin"
for name in sbatch squeue scancel sinfo sacct scontrol srun salloc seff sshare sprio sacctmgr \
  sstat sreport sattach; do
  ln -s "$hachi" "$work/bin/$name"
  help2man --no-info --no-discard-stderr --version-string="$name $version" \
    --name="Slurm's $name, answered by the Hachi scheduler" --section=1 \
    --output="$work/$name.1" "$work/bin/$name"
  gzip -9n <"$work/$name.1" >"$out/$name.1.gz"
done
