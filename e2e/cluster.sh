#!/usr/bin/env bash
# A real Kubernetes control plane on loopback for provreqd's end-to-end tests:
# etcd, kube-apiserver (RBAC, default admission plugins, service accounts),
# kube-controller-manager, kube-scheduler and the kwok controller (which makes
# fake Nodes Ready and Pods bound to them Running).
#
# Usage: cluster.sh up      [--dir DIR]   start a cluster; prints export lines
#        cluster.sh env     [--dir DIR]   print export KUBECONFIG=... for it
#        cluster.sh status  [--dir DIR]   report each component (exit 1 if one is down)
#        cluster.sh down    [--dir DIR]   stop exactly the processes it started,
#                                         remove DIR
#        cluster.sh stop    COMPONENT [--kill] [--dir DIR]
#        cluster.sh start   COMPONENT [--dir DIR]
#        cluster.sh restart COMPONENT [--kill] [--dir DIR]
#                                         stop (SIGTERM, or SIGKILL with --kill)
#                                         and/or start one component again with
#                                         the same flags and ports
#
# COMPONENT is one of: etcd kube-apiserver kube-controller-manager
# kube-scheduler kwok.
#
# Each cluster lives in its own directory: certificates (pki/), kubeconfigs,
# etcd data, logs (logs/COMPONENT.log), pids and ports (cluster.env). Without
# --dir, `up` makes a fresh directory under ${TMPDIR:-/tmp} and the other
# commands use $PROVREQD_E2E_CLUSTER_DIR, else the cluster `up` started last.
# Several clusters run side by side: every port is picked free at `up`.
#
# Environment:
#   PROVREQD_E2E_BINDIR          binaries to use (default: build-binaries.sh's cache)
#   PROVREQD_SRCDIR              source tree whose crd/*.yaml are installed
#                                (default: the tree this script is in)
#   PROVREQD_E2E_APISERVER_ARGS  extra kube-apiserver flags (split on spaces)
#   PROVREQD_E2E_KEEP_DIR=1      `down` stops the processes but keeps DIR
set -euo pipefail

# shellcheck source=lib.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)
MARKER=.provreqd-e2e-cluster
SERVICE_CIDR=10.96.0.0/16
# Pod IPs that kwok writes into Pod status. Nothing ever connects to them:
# there is no kubelet, kube-proxy or CNI in this cluster.
POD_CIDR=10.244.0.0/16

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
}

last_pointer() { printf '%s/last-cluster\n' "$(e2e_cache_root)"; }

# ---------------------------------------------------------------- arguments

cmd=${1:-}
[[ -n "$cmd" ]] || {
	usage >&2
	exit 2
}
shift
dir=""
component=""
kill_signal=TERM
while (($#)); do
	case "$1" in
	--dir)
		[[ $# -ge 2 ]] || e2e_die "--dir needs a value"
		dir=$2
		shift 2
		;;
	--dir=*)
		dir=${1#--dir=}
		shift
		;;
	--kill)
		kill_signal=KILL
		shift
		;;
	-h | --help)
		usage
		exit 0
		;;
	-*) e2e_die "unknown option: $1 (try --help)" ;;
	*)
		[[ -z "$component" ]] || e2e_die "unexpected argument: $1"
		component=$1
		shift
		;;
	esac
done

# resolve_dir: the directory of an existing cluster for every command but up.
resolve_dir() {
	if [[ -z "$dir" ]]; then
		dir=${PROVREQD_E2E_CLUSTER_DIR:-}
	fi
	if [[ -z "$dir" && -f "$(last_pointer)" ]]; then
		dir=$(cat "$(last_pointer)")
	fi
	[[ -n "$dir" ]] || e2e_die "no cluster: pass --dir DIR or run '$0 up' first"
	[[ -f "$dir/$MARKER" ]] || e2e_die "$dir is not a cluster directory made by $0"
	dir=$(cd "$dir" && pwd)
	# shellcheck source=/dev/null
	. "$dir/cluster.env"
}

bindir() {
	printf '%s\n' "${PROVREQD_E2E_BINDIR:-$(e2e_bindir)}"
}

# ---------------------------------------------------------------- ports

# Ports with a socket in any state on this machine (IPv4 and IPv6). awk
# reads the /proc tables in one go; bash's `read` takes a byte at a time.
ports_in_use() {
	local hex
	awk 'FNR > 1 { n = split($2, a, ":"); print a[n] }' /proc/net/tcp /proc/net/tcp6 2>/dev/null |
		while read -r hex; do echo $((16#$hex)); done
}

# pick_ports N: N distinct free ports, below the usual ephemeral range
# (32768-60999) so outgoing connections do not take them meanwhile.
pick_ports() {
	local n=$1 p tries=0
	local -A used=()
	for p in $(ports_in_use); do used[$p]=1; done
	local picked=()
	while ((${#picked[@]} < n)); do
		((++tries < 10000)) || e2e_die "cannot find $n free ports"
		p=$((20000 + (RANDOM * 32768 + RANDOM) % 12000))
		[[ -n "${used[$p]:-}" ]] && continue
		used[$p]=1
		picked+=("$p")
	done
	echo "${picked[@]}"
}

# ---------------------------------------------------------------- pki

# cert NAME CN O USAGE [SAN [CA]]: a P-256 key and a certificate signed by
# CA (default: the cluster CA, "ca"). USAGE is serverAuth or clientAuth.
cert() {
	local name=$1 cn=$2 org=$3 usage=$4 san=${5:-} ca=${6:-ca}
	local p="$dir/pki"
	{
		echo "[req]"
		echo "distinguished_name = dn"
		echo "prompt = no"
		echo "[dn]"
		if [[ -n "$org" ]]; then echo "O = $org"; fi
		echo "CN = $cn"
		echo "[ext]"
		echo "basicConstraints = critical,CA:FALSE"
		echo "keyUsage = critical,digitalSignature,keyEncipherment"
		echo "extendedKeyUsage = $usage"
		if [[ -n "$san" ]]; then echo "subjectAltName = $san"; fi
	} >"$p/$name.cnf"
	openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$p/$name.key" 2>/dev/null
	openssl req -new -config "$p/$name.cnf" -key "$p/$name.key" -out "$p/$name.csr"
	openssl x509 -req -in "$p/$name.csr" -CA "$p/$ca.crt" -CAkey "$p/$ca.key" \
		-set_serial "0x$(openssl rand -hex 16)" -days 365 \
		-extfile "$p/$name.cnf" -extensions ext -out "$p/$name.crt" 2>/dev/null
	rm -f "$p/$name.csr"
}

# ca NAME CN: a self-signed P-256 CA.
ca() {
	local p="$dir/pki" name=$1 cn=$2
	cat >"$p/$name.cnf" <<-EOF
		[req]
		distinguished_name = dn
		prompt = no
		[dn]
		CN = $cn
		[ext]
		basicConstraints = critical,CA:TRUE
		keyUsage = critical,keyCertSign,cRLSign,digitalSignature
		subjectKeyIdentifier = hash
	EOF
	openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$p/$name.key" 2>/dev/null
	openssl req -x509 -new -config "$p/$name.cnf" -extensions ext -key "$p/$name.key" \
		-days 3650 -out "$p/$name.crt"
}

make_pki() {
	local p="$dir/pki"
	mkdir -p "$p"
	chmod 700 "$p"
	ca ca provreqd-e2e-ca
	# The aggregation layer's front proxy, as kubeadm sets it up; without it
	# every delegating component logs a missing requestheader CA.
	ca front-proxy-ca provreqd-e2e-front-proxy-ca
	# The leaf certificates are independent: make them two at a time.
	local jobs=()
	cert serving kube-apiserver "" serverAuth \
		"IP:127.0.0.1,DNS:localhost,IP:10.96.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local" &
	jobs+=($!)
	cert front-proxy-client front-proxy-client "" clientAuth "" front-proxy-ca &
	jobs+=($!)
	cert admin provreqd-e2e-admin system:masters clientAuth &
	jobs+=($!)
	cert kube-scheduler system:kube-scheduler "" clientAuth &
	jobs+=($!)
	cert kube-controller-manager system:kube-controller-manager "" clientAuth &
	jobs+=($!)
	# kwok stands in for every kubelet at once; it gets cluster-admin rather
	# than one identity per fake Node.
	cert kwok kwok-controller system:masters clientAuth &
	jobs+=($!)
	# Service-account tokens are signed with RSA, as on most clusters.
	{
		openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$p/sa.key" 2>/dev/null &&
			openssl pkey -in "$p/sa.key" -pubout -out "$p/sa.pub"
	} &
	jobs+=($!)
	local j
	for j in "${jobs[@]}"; do
		wait "$j" || e2e_die "making certificates failed"
	done
	chmod 600 "$p"/*.key
}

# kubeconfig FILE USER: a kubeconfig with the certificates embedded.
kubeconfig() {
	local file=$1 user=$2 p="$dir/pki"
	(
		umask 077
		cat >"$file" <<-EOF
			apiVersion: v1
			kind: Config
			clusters:
			- name: provreqd-e2e
			  cluster:
			    server: https://127.0.0.1:$APISERVER_PORT
			    certificate-authority-data: $(base64 -w0 <"$p/ca.crt")
			users:
			- name: $user
			  user:
			    client-certificate-data: $(base64 -w0 <"$p/$user.crt")
			    client-key-data: $(base64 -w0 <"$p/$user.key")
			contexts:
			- name: provreqd-e2e
			  context:
			    cluster: provreqd-e2e
			    user: $user
			current-context: provreqd-e2e
		EOF
	)
}

# ---------------------------------------------------------------- processes

pid_of() {
	local f="$dir/run/$1.pid"
	[[ -f "$f" ]] && cat "$f"
}

# is_ours PID: PID is alive and is one of this cluster's processes (each has
# the cluster directory on its command line), so a recycled pid is never hit.
is_ours() {
	local pid=$1
	[[ -n "$pid" && -r "/proc/$pid/cmdline" ]] || return 1
	tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$dir/" || return 1
	# A zombie is as good as gone.
	[[ "$(awk '/^State:/ {print $2}' "/proc/$pid/status" 2>/dev/null)" != Z ]]
}

# The command line of each component, written once at up so start/restart
# reuse the same ports and files.
write_args() {
	local name=$1
	shift
	printf '%s\0' "$@" >"$dir/run/$name.args"
}

launch() {
	local name=$1 args=() port i
	mapfile -d '' args <"$dir/run/$name.args"
	# A restart may come right after the old process let go of its ports.
	for port in $(component_ports "$name"); do
		for ((i = 0; i < 100; i++)); do
			listening "$port" || break
			sleep 0.1
		done
		listening "$port" && e2e_die "port $port of $name is still in use"
	done
	# Ignore SIGHUP so the cluster outlives the terminal that started it;
	# down stops it by pid.
	(
		trap '' HUP
		exec "${args[@]}"
	) >>"$dir/logs/$name.log" 2>&1 </dev/null &
	echo $! >"$dir/run/$name.pid"
	# Tracked by pid file, not as a job of this shell (no "Killed" notices).
	disown $!
}

show_log() {
	local name=$1 f="$dir/logs/$1.log"
	[[ -f "$f" ]] || return 0
	echo "----- last lines of $f -----" >&2
	tail -n 40 "$f" >&2
	echo "----- end of $name log -----" >&2
}

CURL=(curl -fsS --max-time 2)
admin_curl() {
	"${CURL[@]}" --cacert "$dir/pki/ca.crt" --cert "$dir/pki/admin.crt" \
		--key "$dir/pki/admin.key" "https://127.0.0.1:$APISERVER_PORT$1"
}

healthy() {
	case "$1" in
	etcd) "${CURL[@]}" "http://127.0.0.1:$ETCD_PORT/health" 2>/dev/null | grep -q '"health":"true"' ;;
	kube-apiserver) [[ "$(admin_curl /readyz 2>/dev/null)" == ok ]] ;;
	kube-controller-manager) [[ "$("${CURL[@]}" --cacert "$dir/pki/ca.crt" "https://127.0.0.1:$KCM_PORT/healthz" 2>/dev/null)" == ok ]] ;;
	kube-scheduler) [[ "$("${CURL[@]}" --cacert "$dir/pki/ca.crt" "https://127.0.0.1:$SCHEDULER_PORT/healthz" 2>/dev/null)" == ok ]] ;;
	kwok) "${CURL[@]}" "http://127.0.0.1:$KWOK_PORT/healthz" >/dev/null 2>&1 ;;
	*) return 1 ;;
	esac
}

# wait_healthy NAME SECONDS: poll until healthy; fail early, with its log,
# when the process exits.
wait_healthy() {
	local name=$1 limit=$2 start=$SECONDS
	while ! healthy "$name"; do
		if ! is_ours "$(pid_of "$name")"; then
			e2e_log "$name exited during startup"
			show_log "$name"
			return 1
		fi
		if ((SECONDS - start >= limit)); then
			e2e_log "$name not healthy after ${limit}s"
			show_log "$name"
			return 1
		fi
		sleep 0.2
	done
}

# gone PID: the process has exited. (Its command line vanishes earlier,
# while it is still exiting, and a multi-threaded process's leader turns
# zombie before its other threads have let go of its sockets.)
gone() {
	[[ -e "/proc/$1" ]] || return 0
	awk '/^State:/ { z = ($2 == "Z") } /^Threads:/ { t = $2 } END { exit !(z && t <= 1) }' \
		"/proc/$1/status" 2>/dev/null
}

# listening PORT: something listens on 127.0.0.1:PORT (or any address).
listening() {
	local hex
	hex=$(printf '%04X' "$1")
	awk -v port="$hex" 'FNR > 1 && $4 == "0A" { n = split($2, a, ":"); if (a[n] == port) found = 1 }
		END { exit !found }' /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

component_ports() {
	case "$1" in
	etcd) echo "$ETCD_PORT $ETCD_PEER_PORT" ;;
	kube-apiserver) echo "$APISERVER_PORT" ;;
	kube-controller-manager) echo "$KCM_PORT" ;;
	kube-scheduler) echo "$SCHEDULER_PORT" ;;
	kwok) echo "$KWOK_PORT" ;;
	esac
}

# stop_components SIGNAL NAME...: signal each running component at once,
# wait up to 15s for all of them, then SIGKILL whatever is left.
stop_components() {
	local sig=$1 name pid i left
	shift
	local -A pids=()
	for name in "$@"; do
		pid=$(pid_of "$name") || continue
		if is_ours "$pid"; then
			pids[$name]=$pid
			kill "-$sig" "$pid" 2>/dev/null || true
		fi
	done
	for ((i = 0; i < 150; i++)); do
		left=0
		for name in "${!pids[@]}"; do
			gone "${pids[$name]}" || left=1
		done
		((left)) || break
		sleep 0.1
	done
	for name in "${!pids[@]}"; do
		if ! gone "${pids[$name]}"; then
			e2e_log "$name (pid ${pids[$name]}) ignored SIG$sig for 15s; killing it"
			kill -KILL "${pids[$name]}" 2>/dev/null || true
		fi
	done
	for ((i = 0; i < 50; i++)); do
		left=0
		for name in "${!pids[@]}"; do
			gone "${pids[$name]}" || left=1
		done
		((left)) || break
		sleep 0.1
	done
	for name in "$@"; do
		is_ours "$(pid_of "$name" || true)" || rm -f "$dir/run/$name.pid"
	done
}

check_component_name() {
	local c
	for c in "${COMPONENTS[@]}"; do [[ "$c" == "$1" ]] && return 0; done
	e2e_die "unknown component '$1' (one of: ${COMPONENTS[*]})"
}

# ---------------------------------------------------------------- commands

print_env() {
	printf "export KUBECONFIG='%s'\n" "$dir/kubeconfig"
	printf "export PROVREQD_E2E_CLUSTER_DIR='%s'\n" "$dir"
	printf "export PROVREQD_E2E_BINDIR='%s'\n" "$BINDIR"
}

install_crds() {
	local src=${PROVREQD_SRCDIR:-$E2E_DIR/..} f names=() out
	local files=()
	for f in "$src"/crd/*.yaml "$src"/crd/*.yml; do
		[[ -f "$f" ]] && files+=("$f")
	done
	((${#files[@]})) || return 0
	for f in "${files[@]}"; do
		out=$("$BINDIR/kubectl" --kubeconfig "$dir/kubeconfig" apply --server-side \
			--field-manager=provreqd-e2e -o name -f "$f") ||
			e2e_die "installing $f failed"
		while read -r n; do
			[[ "$n" == customresourcedefinition.* ]] && names+=("$n")
		done <<<"$out"
	done
	if ((${#names[@]})); then
		"$BINDIR/kubectl" --kubeconfig "$dir/kubeconfig" wait --for=condition=Established \
			--timeout=60s "${names[@]}" >/dev/null ||
			e2e_die "CRDs not Established: ${names[*]}"
		e2e_log "installed ${#names[@]} CRD(s) from $src/crd"
	fi
}

cmd_up() {
	local t0=$SECONDS
	BINDIR=$(bindir)
	local b
	for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok; do
		[[ -x "$BINDIR/$b" ]] || e2e_die "$BINDIR/$b missing: run $E2E_DIR/build-binaries.sh first"
	done
	command -v openssl >/dev/null || e2e_die "openssl not found (apt-get install openssl)"
	command -v curl >/dev/null || e2e_die "curl not found (apt-get install curl)"

	if [[ -z "$dir" ]]; then
		dir=$(mktemp -d "${TMPDIR:-/tmp}/provreqd-e2e.XXXXXX")
	else
		mkdir -p "$dir"
		[[ -z "$(ls -A "$dir")" ]] || e2e_die "$dir is not empty"
	fi
	dir=$(cd "$dir" && pwd)
	touch "$dir/$MARKER"
	mkdir -p "$dir/run" "$dir/logs" "$dir/etcd"
	chmod 700 "$dir/etcd"

	# Tear down whatever started if up does not finish.
	local ok=0
	# shellcheck disable=SC2317 # invoked by the trap
	up_cleanup() {
		((ok)) && return 0
		e2e_log "startup failed; stopping what was started in $dir"
		stop_components KILL "${COMPONENTS[@]}"
		e2e_log "logs kept in $dir/logs (remove $dir when done)"
		rm -f "$dir/$MARKER"
	}
	trap up_cleanup EXIT
	trap 'exit 130' INT TERM

	local ports
	read -r -a ports <<<"$(pick_ports 6)"
	ETCD_PORT=${ports[0]}
	ETCD_PEER_PORT=${ports[1]}
	APISERVER_PORT=${ports[2]}
	KCM_PORT=${ports[3]}
	SCHEDULER_PORT=${ports[4]}
	KWOK_PORT=${ports[5]}
	cat >"$dir/cluster.env" <<-EOF
		# Written by cluster.sh up; sourced by cluster.sh and tests.
		BINDIR='$BINDIR'
		ETCD_PORT=$ETCD_PORT
		ETCD_PEER_PORT=$ETCD_PEER_PORT
		APISERVER_PORT=$APISERVER_PORT
		KCM_PORT=$KCM_PORT
		SCHEDULER_PORT=$SCHEDULER_PORT
		KWOK_PORT=$KWOK_PORT
		ETCD_ENDPOINT=http://127.0.0.1:$ETCD_PORT
		APISERVER_URL=https://127.0.0.1:$APISERVER_PORT
	EOF

	e2e_log "making certificates in $dir/pki"
	make_pki
	kubeconfig "$dir/kubeconfig" admin
	kubeconfig "$dir/kube-scheduler.kubeconfig" kube-scheduler
	kubeconfig "$dir/kube-controller-manager.kubeconfig" kube-controller-manager
	kubeconfig "$dir/kwok.kubeconfig" kwok
	local p="$dir/pki"

	# etcd on loopback only. The cluster is thrown away after the tests, so
	# etcd skips fsync: much faster on slow disks, unsafe only across a
	# machine crash.
	write_args etcd "$BINDIR/etcd" \
		--name=provreqd-e2e \
		--data-dir="$dir/etcd" \
		--listen-client-urls="http://127.0.0.1:$ETCD_PORT" \
		--advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
		--listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-cluster="provreqd-e2e=http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-cluster-state=new \
		--unsafe-no-fsync \
		--log-level=warn

	local extra=()
	if [[ -n "${PROVREQD_E2E_APISERVER_ARGS:-}" ]]; then
		read -r -a extra <<<"$PROVREQD_E2E_APISERVER_ARGS"
	fi
	# The "kubernetes" Service gets no Endpoints: the apiserver refuses its
	# own loopback address there, and nothing in this cluster runs in a Pod.
	write_args kube-apiserver "$BINDIR/kube-apiserver" \
		--etcd-servers="http://127.0.0.1:$ETCD_PORT" \
		--bind-address=127.0.0.1 \
		--advertise-address=127.0.0.1 \
		--endpoint-reconciler-type=none \
		--secure-port="$APISERVER_PORT" \
		--cert-dir="$dir/run/kube-apiserver-certs" \
		--tls-cert-file="$p/serving.crt" \
		--tls-private-key-file="$p/serving.key" \
		--client-ca-file="$p/ca.crt" \
		--authorization-mode=Node,RBAC \
		--service-account-issuer=https://kubernetes.default.svc.cluster.local \
		--service-account-key-file="$p/sa.pub" \
		--service-account-signing-key-file="$p/sa.key" \
		--service-cluster-ip-range="$SERVICE_CIDR" \
		--requestheader-client-ca-file="$p/front-proxy-ca.crt" \
		--requestheader-allowed-names=front-proxy-client \
		--requestheader-username-headers=X-Remote-User \
		--requestheader-group-headers=X-Remote-Group \
		--requestheader-extra-headers-prefix=X-Remote-Extra- \
		--proxy-client-cert-file="$p/front-proxy-client.crt" \
		--proxy-client-key-file="$p/front-proxy-client.key" \
		--allow-privileged=true \
		--profiling=false \
		"${extra[@]}"

	write_args kube-controller-manager "$BINDIR/kube-controller-manager" \
		--kubeconfig="$dir/kube-controller-manager.kubeconfig" \
		--authentication-kubeconfig="$dir/kube-controller-manager.kubeconfig" \
		--authorization-kubeconfig="$dir/kube-controller-manager.kubeconfig" \
		--bind-address=127.0.0.1 \
		--secure-port="$KCM_PORT" \
		--tls-cert-file="$p/serving.crt" \
		--tls-private-key-file="$p/serving.key" \
		--leader-elect=false \
		--controllers='*,-nodelifecycle' \
		--use-service-account-credentials=true \
		--service-account-private-key-file="$p/sa.key" \
		--root-ca-file="$p/ca.crt" \
		--cluster-signing-cert-file="$p/ca.crt" \
		--cluster-signing-key-file="$p/ca.key" \
		--service-cluster-ip-range="$SERVICE_CIDR" \
		--profiling=false

	write_args kube-scheduler "$BINDIR/kube-scheduler" \
		--kubeconfig="$dir/kube-scheduler.kubeconfig" \
		--authentication-kubeconfig="$dir/kube-scheduler.kubeconfig" \
		--authorization-kubeconfig="$dir/kube-scheduler.kubeconfig" \
		--bind-address=127.0.0.1 \
		--secure-port="$SCHEDULER_PORT" \
		--tls-cert-file="$p/serving.crt" \
		--tls-private-key-file="$p/serving.key" \
		--leader-elect=false \
		--profiling=false

	# kwok manages only Nodes annotated kwok.x-k8s.io/node=fake; nodes get
	# 127.0.0.1 as their address so nothing is ever sent off this machine.
	write_args kwok "$BINDIR/kwok" \
		--kubeconfig="$dir/kwok.kubeconfig" \
		--config="$E2E_DIR/kwok-stages.yaml" \
		--manage-all-nodes=false \
		--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
		--node-ip=127.0.0.1 \
		--cidr="$POD_CIDR" \
		--node-lease-duration-seconds=0 \
		--server-address="127.0.0.1:$KWOK_PORT"

	e2e_log "starting etcd, kube-apiserver (port $APISERVER_PORT), kube-controller-manager, kube-scheduler, kwok"
	launch etcd
	wait_healthy etcd 30
	launch kube-apiserver
	wait_healthy kube-apiserver 90
	e2e_log "kube-apiserver ready after $((SECONDS - t0))s"
	launch kube-controller-manager
	launch kube-scheduler
	launch kwok
	# While they start.
	install_crds
	wait_healthy kube-controller-manager 60
	wait_healthy kube-scheduler 60
	wait_healthy kwok 60

	# Pods need their namespace's default ServiceAccount (admission checks
	# it); the controller manager creates it shortly after start.
	local start=$SECONDS
	until "$BINDIR/kubectl" --kubeconfig "$dir/kubeconfig" -n default get serviceaccount default >/dev/null 2>&1; do
		((SECONDS - start < 60)) || {
			show_log kube-controller-manager
			e2e_die "no default ServiceAccount after 60s"
		}
		sleep 0.2
	done

	mkdir -p "$(e2e_cache_root)"
	printf '%s\n' "$dir" >"$(last_pointer)"
	ok=1
	trap - EXIT INT TERM
	e2e_log "cluster up in $((SECONDS - t0))s: $dir"
	print_env
}

cmd_env() {
	resolve_dir
	print_env
}

cmd_status() {
	resolve_dir
	local c pid bad=0 state port
	printf 'cluster %s\n' "$dir"
	for c in "${COMPONENTS[@]}"; do
		pid=$(pid_of "$c" || true)
		case "$c" in
		etcd) port=$ETCD_PORT ;;
		kube-apiserver) port=$APISERVER_PORT ;;
		kube-controller-manager) port=$KCM_PORT ;;
		kube-scheduler) port=$SCHEDULER_PORT ;;
		kwok) port=$KWOK_PORT ;;
		esac
		if ! is_ours "$pid"; then
			state="stopped"
			bad=1
		elif healthy "$c"; then
			state="running, healthy"
		else
			state="running, NOT healthy"
			bad=1
		fi
		printf '  %-24s %-22s pid %-8s port %s\n' "$c" "$state" "${pid:--}" "$port"
	done
	return "$bad"
}

cmd_down() {
	resolve_dir
	local c
	# Clients first, then the apiserver while etcd still answers its
	# shutdown writes, then etcd.
	stop_components TERM kwok kube-scheduler kube-controller-manager
	stop_components TERM kube-apiserver
	stop_components TERM etcd
	for c in "${COMPONENTS[@]}"; do
		if is_ours "$(pid_of "$c" || true)"; then
			e2e_die "$c is still running; not removing $dir"
		fi
	done
	if [[ -f "$(last_pointer)" && "$(cat "$(last_pointer)")" == "$dir" ]]; then
		rm -f "$(last_pointer)"
	fi
	if [[ "${PROVREQD_E2E_KEEP_DIR:-0}" == 1 ]]; then
		rm -f "$dir/$MARKER"
		e2e_log "cluster stopped; kept $dir"
	else
		rm -rf "$dir"
		e2e_log "cluster stopped and $dir removed"
	fi
}

cmd_stop() {
	resolve_dir
	[[ -n "$component" ]] || e2e_die "stop needs a COMPONENT"
	check_component_name "$component"
	stop_components "$kill_signal" "$component"
	e2e_log "$component stopped (SIG$kill_signal)"
}

cmd_start() {
	resolve_dir
	[[ -n "$component" ]] || e2e_die "start needs a COMPONENT"
	check_component_name "$component"
	if is_ours "$(pid_of "$component" || true)"; then
		e2e_die "$component is already running"
	fi
	launch "$component"
	wait_healthy "$component" 90
	e2e_log "$component started (pid $(pid_of "$component"))"
}

# Read to the end before anything runs, so editing this file meanwhile
# cannot change what a running cluster.sh does.
main() {
	case "$cmd" in
	up) cmd_up ;;
	env) cmd_env ;;
	status) cmd_status ;;
	down) cmd_down ;;
	stop) cmd_stop ;;
	start) cmd_start ;;
	restart)
		cmd_stop
		cmd_start
		;;
	-h | --help | help) usage ;;
	*) e2e_die "unknown command '$cmd' (try --help)" ;;
	esac
}
{
	main
	exit
}
