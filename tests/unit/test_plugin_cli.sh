#!/bin/sh
# kubectl-create-provisioningrequest as a user runs it, without a cluster:
# --help, --dry-run=client in every output format (checked with grep, so the
# test needs nothing but a POSIX shell), the namespace taken from the
# kubeconfig context, exit status and messages of refused command lines, and
# the message when the apiserver cannot be reached.
set -eu
: "${PRD_BUILDDIR:?}"
plugin="$PRD_BUILDDIR/kubectl-create-provisioningrequest"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/prd-plugin-cli.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
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

echo "$checks checks"
exit $fail
