#!/usr/bin/env bash
# --metrics-access=tokenreview against the real apiserver: /metrics answers
# a ServiceAccount bound to a ClusterRole granting get on the /metrics
# non-resource URL (200, provreqd_ families and process_ ones), refuses one
# without that binding (403, naming it), a forged token (401) and a request
# without a token (401); /readyz and /healthz answer without a token (the
# kubelet's probes). Removing the binding takes effect at the next scrape.
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
# shellcheck source=../tools/pr-e2e-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tools/pr-e2e-lib.sh"

pr_init ma53
role=$(t_unique metrics-reader53)
pr_on_exit "kubectl delete clusterrole $role --ignore-not-found >/dev/null 2>&1; kubectl delete clusterrolebinding $role --ignore-not-found >/dev/null 2>&1"
kubectl create serviceaccount scraper -n "$PR_NS" >/dev/null
kubectl create serviceaccount nobody -n "$PR_NS" >/dev/null
kubectl create clusterrole "$role" --verb=get --non-resource-url=/metrics >/dev/null
kubectl create clusterrolebinding "$role" --clusterrole="$role" --serviceaccount="$PR_NS:scraper" >/dev/null
scraper=$(kubectl create token scraper -n "$PR_NS")
nobody=$(kubectl create token nobody -n "$PR_NS")

pr_start --metrics-access tokenreview
# code [TOKEN] PATH: the HTTP status of GET PATH.
code() {
	local auth=()
	(($# == 2)) && auth=(-H "Authorization: Bearer $1") && shift
	curl -sS --max-time 10 -o "$PR_WORK/body" -w '%{http_code}' "${auth[@]}" "http://$PR_HTTP$1"
}
t_eq "/readyz needs no token" 200 "$(code /readyz)"
t_eq "/healthz needs no token" 200 "$(code /healthz)"
t_eq "/metrics without a token: 401" 401 "$(code /metrics)"
t_eq "/metrics with a forged token: 401" 401 "$(code forged.token.here /metrics)"
t_eq "/metrics as a ServiceAccount without the binding: 403" 403 "$(code "$nobody" /metrics)"
t_contains "the refusal names the user" "system:serviceaccount:$PR_NS:nobody" "$(cat "$PR_WORK/body")"
t_eq "/metrics as the bound scraper: 200" 200 "$(code "$scraper" /metrics)"
t_contains "it serves provreqd's families" "provreqd_build_info" "$(cat "$PR_WORK/body")"
t_contains "and the process ones" "process_resident_memory_bytes" "$(cat "$PR_WORK/body")"
kubectl delete clusterrolebinding "$role" >/dev/null
t_wait 30 "without the binding the scraper gets 403" bash -c "[[ \$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer $scraper' http://$PR_HTTP/metrics) == 403 ]]"
t_done
