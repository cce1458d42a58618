#!/bin/sh
# kubectl-create-provisioningrequest as a user runs it, without a cluster:
# --help, --dry-run=client in every output format (checked with grep, so the
# test needs nothing but a POSIX shell), the namespace taken from the
# kubeconfig context, exit status and messages of refused command lines, and
# the message when the apiserver cannot be reached. Then against a stand-in
# apiserver (tests/unit/plugin_fakeapi): what kubectl's global flags
# (--cluster, --user, --server, --token, --as, --as-group) put on the wire,
# --label/--annotation in the object, and the messages for a missing CRD
# and an API error.
set -eu
: "${PRD_BUILDDIR:?}"
plugin="$PRD_BUILDDIR/kubectl-create-provisioningrequest"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/prd-plugin-cli.XXXXXX")
api_pid=
stop_api() {
	if [ -n "$api_pid" ]; then
		kill "$api_pid" 2>/dev/null || true
		wait "$api_pid" 2>/dev/null || true
		api_pid=
	fi
}
trap 'stop_api; rm -rf "$tmp"' EXIT
fail=0
checks=0

bad() {
	echo "FAIL: $*"
	fail=1
}

# expect_status WANT -- ARGS...: run the plugin, keep stdout/stderr.
expect_status() {
	want=$1
	shift
	set +e
	"$plugin" "$@" >"$tmp/out" 2>"$tmp/err"
	got=$?
	set -e
	checks=$((checks + 1))
	[ "$got" -eq "$want" ] || bad "exit $got, expected $want, for: $* (stderr: $(cat "$tmp/err"))"
}

# has FILE TEXT: FILE contains the fixed string TEXT.
has() {
	checks=$((checks + 1))
	grep -qF -- "$2" "$tmp/$1" || {
		bad "$1 does not contain '$2':"
		sed 's/^/    /' "$tmp/$1"
	}
}

hasnt() {
	checks=$((checks + 1))
	if grep -qF -- "$2" "$tmp/$1"; then
		bad "$1 contains '$2':"
		sed 's/^/    /' "$tmp/$1"
	fi
}

# No kubeconfig anywhere: a client dry run still works, for "default".
export KUBECONFIG="$tmp/none"
export HOME="$tmp"
unset KUBERNETES_SERVICE_HOST KUBERNETES_SERVICE_PORT 2>/dev/null || true

expect_status 0 --help
has out "kubectl create provisioningrequest NAME --class=CLASS --template=PODTEMPLATE --count=N"
has out "--param KEY=VALUE"

expect_status 0 job-1 --class=check-capacity --template=tpl --count=3 --dry-run=client -o yaml
cat >"$tmp/want" <<'EOF'
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata:
  name: job-1
spec:
  provisioningClassName: check-capacity.autoscaling.x-k8s.io
  podSets:
  - podTemplateRef:
      name: tpl
    count: 3
EOF
checks=$((checks + 1))
cmp -s "$tmp/want" "$tmp/out" || { bad "-o yaml differs:"; diff "$tmp/want" "$tmp/out" || true; }

expect_status 0 job-2 -n team-a --class=atomic-scale-up --template=w --count=4 --template=l --count=1 \
	--param ValidUntilSeconds=600 --param noRetry=true --dry-run=client -o json
has out '"namespace": "team-a"'
has out '"provisioningClassName": "best-effort-atomic-scale-up.autoscaling.x-k8s.io"'
has out '"ValidUntilSeconds": "600"'
has out '"noRetry": "true"'
# pod sets in order, counts as JSON numbers
tr -d ' \n' <"$tmp/out" >"$tmp/flat"
has flat '"podSets":[{"podTemplateRef":{"name":"w"},"count":4},{"podTemplateRef":{"name":"l"},"count":1}]'

expect_status 0 job-3 --class=check-capacity --template=t --count=1 --dry-run
has out "provisioningrequest.autoscaling.x-k8s.io/job-3 created (dry run)"
expect_status 0 job-3 --class=check-capacity --template=t --count=1 --dry-run=client -o name
has out "provisioningrequest.autoscaling.x-k8s.io/job-3"
hasnt out "created"

# --cpu/--memory: the PodTemplate too, both in one List
expect_status 0 job-4 --class=atomic-scale-up --count=2 --cpu=3 --memory=8Gi --dry-run=client -o yaml
has out "kind: List"
has out "kind: PodTemplate"
has out "    name: job-4"
has out "            cpu: \"3\""
has out "            memory: 8Gi"
has out "image: registry.k8s.io/pause:3.10"
has out "      name: job-4"
expect_status 0 job-4 --class=atomic-scale-up --count=2 --gpu=1 --dry-run=client
has out "podtemplate/job-4 created (dry run)"
has out "provisioningrequest.autoscaling.x-k8s.io/job-4 created (dry run)"

# The namespace of the kubeconfig's context, unless -n says otherwise.
cat >"$tmp/kubeconfig" <<'EOF'
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: u
  user: {token: abc}
contexts:
- name: ctx-a
  context: {cluster: c, user: u, namespace: from-context}
- name: ctx-b
  context: {cluster: c, user: u}
current-context: ctx-a
EOF
export KUBECONFIG="$tmp/kubeconfig"
# (that the context's namespace is used is checked against a real
# apiserver in e2e/scenarios/69-plugin.sh)
# a server dry run talks to the apiserver
expect_status 1 j --class=check-capacity --template=t --count=1 --dry-run=server --request-timeout=2s
has err "error: cannot reach the apiserver at https://127.0.0.1:1:"
expect_status 1 j --class=check-capacity --template=t --count=1 --request-timeout=2s
has err "error: cannot reach the apiserver at https://127.0.0.1:1:"
expect_status 1 j --class=check-capacity --template=t --count=1 --kubeconfig "$tmp/missing"
has err "error: cannot load the kubeconfig:"
expect_status 1 j --class=check-capacity --template=t --count=1 --context nope --dry-run=client
has err "error: cannot load the kubeconfig:"

# Refused command lines: exit 1, every problem named, a pointer to --help.
expect_status 1 job --class=fast --template=t --count=0
has err "error: --class fast: unknown class; use check-capacity, atomic-scale-up or a full class name"
has err "error: --count 0: must be a whole number from 1 to 2147483647"
has err "See 'kubectl create provisioningrequest --help' for usage."
checks=$((checks + 1))
[ ! -s "$tmp/out" ] || bad "stdout not empty on refusal: $(cat "$tmp/out")"
expect_status 1 --class=check-capacity --template=t --count=1
has err "error: NAME is required"
expect_status 1 job --class=check-capacity --template=a --template=b --count=1
has err "error: 1 --count for 2 --template: give one --count per --template, in the same order"
expect_status 1 job --class=check-capacity --count=1
has err "error: --template is required"
expect_status 1 Job --class=check-capacity --template=t --count=1
has err "error: NAME Job: not a valid name"

# Typos get a suggestion.
expect_status 1 job --class=chek-capacity --template=t --count=1
has err "error: --class chek-capacity: unknown class; did you mean check-capacity?"
expect_status 1 job --clas=check-capacity --template=t --count=1
has err "error: unknown flag: --clas (did you mean --class?)"
expect_status 1 job --class=check-capacity --template=t --count=1 --as-group=g
has err "error: --as-group needs --as"
expect_status 1 job --class=check-capacity --template=t --count=1 --label=-bad=x
has err "error: --label -bad: not a valid key"

# --- against a stand-in apiserver
fakeapi="$PRD_BUILDDIR/tests/unit/plugin_fakeapi"
# start_api MODE: (re)start it; $url is where it listens, its requests go
# to $tmp/api.log.
start_api() {
	stop_api
	: >"$tmp/url"
	"$fakeapi" "$1" "$tmp/api.log" >"$tmp/url" &
	api_pid=$!
	n=0
	while [ ! -s "$tmp/url" ] && [ $n -lt 100 ]; do
		sleep 0.1
		n=$((n + 1))
	done
	url=$(cat "$tmp/url")
	[ -n "$url" ] || { echo "plugin_fakeapi did not start"; exit 99; }
}

start_api create
# current-context points at a dead server; --cluster/--user choose others.
cat >"$tmp/kubeconfig2" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: dead
  cluster: {server: "https://127.0.0.1:1"}
- name: fake
  cluster: {server: "$url"}
users:
- name: u
  user: {token: context-token}
- name: u2
  user: {token: u2-token}
contexts:
- name: ctx
  context: {cluster: dead, user: u, namespace: from-context}
current-context: ctx
EOF
export KUBECONFIG="$tmp/kubeconfig2"
expect_status 0 j1 --class=check-capacity --template=t --count=1 --cluster fake --user=u2
has out "provisioningrequest.autoscaling.x-k8s.io/j1 created"
cp "$tmp/api.log" "$tmp/log"
has log "POST /apis/autoscaling.x-k8s.io/v1/namespaces/from-context/provisioningrequests?fieldManager=kubectl-create"
has log "auth: Bearer u2-token"
checks=$((checks + 1))
grep -qx "impersonate-user: " "$tmp/log" || bad "impersonation without --as: $(cat "$tmp/log")"
# kubectl's global flags before NAME (as `kubectl create provisioningrequest
# -n team-a ...` hands them on) and after it; --server/--token replace the
# context's server and token; --as/--as-group impersonate.
: >"$tmp/api.log"
expect_status 0 -n team-a --server "$url" --as jane j2 --as-group ml --as-group=system:authenticated \
	--token flag-token --insecure-skip-tls-verify --class=atomic-scale-up --template=t --count=2 \
	--label team=ml --label app.kubernetes.io/part-of=training --annotation "note=first try, 2 GPUs"
has out "provisioningrequest.autoscaling.x-k8s.io/j2 created"
cp "$tmp/api.log" "$tmp/log"
has log "POST /apis/autoscaling.x-k8s.io/v1/namespaces/team-a/provisioningrequests?fieldManager=kubectl-create"
has log "auth: Bearer flag-token"
has log "impersonate-user: jane"
has log "impersonate-groups: ml,system:authenticated"
has log '"labels":{"team":"ml","app.kubernetes.io\/part-of":"training"}'
has log '"annotations":{"note":"first try, 2 GPUs"}'
# --label/--annotation show in a client dry run too
expect_status 0 j3 --class=check-capacity --template=t --count=1 --label team=ml --dry-run=client -o yaml
has out "  labels:"
has out "    team: ml"
# --server without any kubeconfig, as kubectl allows; namespace "default"
: >"$tmp/api.log"
KUBECONFIG="$tmp/none"
expect_status 0 j4 --server="$url" --token=t4 --class=check-capacity --template=t --count=1
KUBECONFIG="$tmp/kubeconfig2"
cp "$tmp/api.log" "$tmp/log"
has log "POST /apis/autoscaling.x-k8s.io/v1/namespaces/default/provisioningrequests"
has log "auth: Bearer t4"
# A --template that does not exist is created anyway, with a warning
# naming it; one that exists gets none.
expect_status 0 j4b --server="$url" --class=check-capacity --template=missing-t --count=1 --template=t --count=2
has err "warning: podtemplate/missing-t does not exist in namespace from-context"
checks=$((checks + 1))
grep -q "podtemplate/t " "$tmp/err" && bad "a warning for the PodTemplate that exists: $(cat "$tmp/err")"
# A count above what provreqd plans is created with a warning.
expect_status 0 j4c --server="$url" --class=check-capacity --template=t --count=16777217
has err "warning: --count 16777217: provreqd plans at most 16777216 pods of one pod set"
# a connection error names the server actually used
expect_status 1 j5 --server https://127.0.0.1:1 --class=check-capacity --template=t --count=1 --request-timeout=2s
has err "error: cannot reach the apiserver at https://127.0.0.1:1:"

# An API error names the server too.
start_api exists
expect_status 1 j6 --server "$url" --class=check-capacity --template=t --count=1
has err "Error from server (AlreadyExists): provisioningrequests.autoscaling.x-k8s.io \"j6\" already exists (server $url)"

# No CRD: the 404 on the resource says so, whichever way the apiserver
# words it; a PodTemplate made for the request is deleted again.
for mode in nocrd nocrd-plain; do
	start_api $mode
	expect_status 1 j7 --server "$url" --class=check-capacity --count=1 --cpu=1
	has err "error: the apiserver at $url does not serve provisioningrequests.autoscaling.x-k8s.io (404): is the ProvisioningRequest CRD installed? kubectl apply -f crd/provisioningrequests.yaml"
	has err "podtemplate/j7 deleted again"
	cp "$tmp/api.log" "$tmp/log"
	has log "DELETE /api/v1/namespaces/from-context/podtemplates/j7"
done
stop_api

echo "$checks checks"
exit $fail
