#!/usr/bin/env bash
# Differential test against kube-scheduler (issue 17, item 1): small random
# cases, each with its own 2-4 kwok Nodes (label case=<id>) and a PodTemplate
# whose pods select them (nodeSelector case=<id>), so cases never share a
# node. For each case provreqd answers a check-capacity request (noRetry) and
# then the real kube-scheduler places the same pods; the two must agree:
#
#   provreqd Provisioned=True/CapacityIsFound    <=>  every pod is bound
#   provreqd "only X of Y pods fit ..."          <=>  exactly X pods are bound
#
# The request is deleted before the pods are created, so its booking never
# counts (the pods carry no consume annotation). All pods of a case are
# identical, so the number kube-scheduler binds does not depend on the
# order it takes them in (the per-node and per-zone limits are the same for
# every pod) and any difference is a real one.
#
# What a case may carry (drawn from bash's $RANDOM, seeded per case with
# SEED*1000+index so one case can be regenerated): nodes of 2-8 cpu and
# 8-32Gi in zones za/zb/zc, some tainted dedicated=x:NoSchedule, some
# labelled disk=ssd; pods of 1-3 cpu and 1Gi with, at random, a nodeSelector
# on disk=ssd, required node affinity (In/NotIn on zone, disk or hostname),
# a toleration of the taint, hostname or zone anti-affinity against their own
# label, a zone spread constraint (maxSkew 1-2, DoNotSchedule, taint and
# affinity policies Honor/Ignore/unset, minDomains sometimes) and a hostPort.
#
# Every fourth case (index 3, 7, ...; decided without a random draw, so
# the other cases are what they were) is a gang of one zone: its
# PodTemplate carries kueue.x-k8s.io/podset-required-topology:
# topology.kubernetes.io/zone. provreqd books it in one zone (details
# topologyDomain) or says how many pods fit in each zone; the pods
# kube-scheduler gets carry that zone (or the zone provreqd said fits the
# most) as a required node affinity, and the answers must agree the same
# way: a booking in one zone is one kube-scheduler can place.
#
# Cases run in batches (E2E_DIFF_BATCH, default 10): all nodes of a batch,
# then all requests, then all pods. The batch's nodes are gone before the
# next batch starts, since a spread constraint with nodeAffinityPolicy
# Ignore counts the zones of every node in the cluster.
#
#   E2E_DIFF_CASES  number of cases (default 20)
#   E2E_DIFF_SEED   base seed (default: from the clock, printed)
#   E2E_DIFF_BATCH  cases per batch (default 10)
#
# It can fail: a provreqd that ignores nodeAffinityPolicy Ignore (the
# spread then counts only the case's own zones) disagrees on 1 of 60 cases
# of seed 4242 (case 59: provreqd says 5 of 5, kube-scheduler binds 2).
#
# Every disagreement is printed in full on stderr (seed, case, nodes, pod
# spec, both answers, where kube-scheduler put the pods) before the scenario
# fails. Figures: bench=scheduler_differential_{cases,agreement_pct,
# disagreements}.
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
# shellcheck source=../tools/pr-e2e-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tools/pr-e2e-lib.sh"

NCASES=${E2E_DIFF_CASES:-20}
BATCH=${E2E_DIFF_BATCH:-10}
SEED=${E2E_DIFF_SEED:-$(($(date +%s) % 100000))}
[[ "$NCASES" =~ ^[0-9]+$ && "$BATCH" =~ ^[1-9][0-9]*$ && "$SEED" =~ ^[0-9]+$ ]] ||
	t_fail "E2E_DIFF_CASES, E2E_DIFF_BATCH and E2E_DIFF_SEED must be integers"

pr_init pr77
run=$(t_unique df)
PR_GROUPS+=("$run")
mkdir -p "$PR_WORK/cases"
t_log "seed $SEED, $NCASES cases in batches of $BATCH, run $run"
t_log "kube-scheduler: $("$PROVREQD_E2E_BINDIR/kube-scheduler" --version 2>&1) (pinned $KUBERNETES_VERSION)"
echo "scheduler_version=$KUBERNETES_VERSION"

# rnd N: R = a number in [0, N). A global, not $(...): a subshell's draws
# would not advance the seeded sequence.
R=0
rnd() { R=$((RANDOM % $1)); }
ZONES=(za zb zc)

# gen_case I BATCH: write the case's nodes.yaml, spec.yaml (the pod spec,
# unindented), template.yaml, pods.yaml and count into its directory.
gen_case() {
	local i=$1 b=$2
	local id="$run-c$i"
	local d="$PR_WORK/cases/$id" n j cpu mem zone name names=() tainted=0 count
	local aff="" anti="" tol="" spread="" sel="" port="" key op vals topo=0 tann="" zaff
	mkdir -p "$d"
	if ((i % 4 == 3)); then
		topo=1
		echo 1 >"$d/topo"
		tann=$'\n    annotations: {kueue.x-k8s.io/podset-required-topology: topology.kubernetes.io/zone}'
	fi
	RANDOM=$((SEED * 1000 + i))
	rnd 3; n=$((2 + R))
	for ((j = 0; j < n; j++)); do
		name="$id-n$j"
		rnd 7; cpu=$((2 + R))
		rnd 25; mem=$((8 + R))
		rnd 3; zone=${ZONES[R]}
		names+=("$name")
		cat <<EOF
---
apiVersion: v1
kind: Node
metadata:
  name: $name
  annotations: {kwok.x-k8s.io/node: fake}
  labels:
    $PR_GROUP_LABEL: $run
    diffbatch: "$b"
    case: $id
    kubernetes.io/hostname: $name
    topology.kubernetes.io/zone: $zone
EOF
		rnd 2
		if ((R)); then
			echo "    disk: ssd"
		fi
		echo "spec:"
		echo "  providerID: kwok://$name"
		rnd 4
		if ((R == 0)); then
			echo "  taints: [{key: dedicated, value: x, effect: NoSchedule}]"
			tainted=1
		fi
		cat <<EOF
status:
  capacity: {cpu: "$cpu", memory: ${mem}Gi, pods: "110"}
  allocatable: {cpu: "$cpu", memory: ${mem}Gi, pods: "110"}
EOF
	done >"$d/nodes.yaml"

	# nodeSelector on the extra label (even when no node has it, sometimes)
	rnd 4
	if ((R == 0)); then
		sel=$'\n  disk: ssd'
	fi
	# required node affinity
	rnd 3
	if ((R == 0)); then
		rnd 2; op=$([[ $R == 0 ]] && echo In || echo NotIn)
		rnd 3
		case $R in
		0)
			key=topology.kubernetes.io/zone
			rnd 3; vals=${ZONES[R]}
			rnd 2
			if ((R)); then
				vals="$vals, ${ZONES[(R + 1) % 3]}"
			fi
			;;
		1) key=disk; vals=ssd ;;
		*)
			key=kubernetes.io/hostname
			rnd "$n"; vals=${names[R]}
			;;
		esac
		aff="  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
      - matchExpressions:
        - {key: $key, operator: $op, values: [$vals]}"
	fi
	# anti-affinity against the case's own pods
	rnd 3
	if ((R == 0)); then
		rnd 2; key=$([[ $R == 0 ]] && echo kubernetes.io/hostname || echo topology.kubernetes.io/zone)
		anti="  podAntiAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
    - labelSelector: {matchLabels: {app: $id}}
      topologyKey: $key"
	fi
	# a toleration of the taint, more often when some node has it
	rnd $((tainted ? 2 : 4))
	if ((R == 0)); then
		rnd 2
		if ((R)); then
			tol=$'tolerations:\n- {key: dedicated, operator: Equal, value: x, effect: NoSchedule}'
		else
			tol=$'tolerations:\n- {key: dedicated, operator: Exists}'
		fi
	fi
	# zone topology spread
	rnd 2
	if ((R == 0)); then
		rnd 2
		spread="topologySpreadConstraints:
- maxSkew: $((1 + R))
  topologyKey: topology.kubernetes.io/zone
  whenUnsatisfiable: DoNotSchedule
  labelSelector: {matchLabels: {app: $id}}"
		local pol=("" Honor Ignore)
		rnd 3
		if ((R)); then
			spread+=$'\n'"  nodeTaintsPolicy: ${pol[R]}"
		fi
		rnd 3
		if ((R)); then
			spread+=$'\n'"  nodeAffinityPolicy: ${pol[R]}"
		fi
		rnd 3
		if ((R == 0)); then
			rnd 3
			spread+=$'\n'"  minDomains: $((1 + R))"
		fi
	fi
	rnd 5
	if ((R == 0)); then
		port=$'\n  ports: [{containerPort: 8080, hostPort: 8080}]'
	fi
	rnd 3; cpu=$((1 + R))
	rnd 8; count=$((1 + R))
	echo "$count" >"$d/count"
	{
		echo "nodeSelector:"
		echo "  case: $id$sel"
		if [[ -n "$aff$anti" ]]; then
			echo "affinity:"
			[[ -n "$aff" ]] && echo "$aff"
			[[ -n "$anti" ]] && echo "$anti"
		fi
		[[ -n "$tol" ]] && echo "$tol"
		[[ -n "$spread" ]] && echo "$spread"
		cat <<EOF
terminationGracePeriodSeconds: 0
containers:
- name: main
  image: registry.k8s.io/pause:3.10
  resources: {requests: {cpu: "$cpu", memory: 1Gi}}$port
EOF
	} >"$d/spec.yaml"
	# The pods of a one-zone gang carry the zone as a required node
	# affinity (__ZONE__, filled in once provreqd has answered): one more
	# expression of the one term, or a term of its own.
	cp "$d/spec.yaml" "$d/podspec.yaml"
	if ((topo)); then
		zaff="        - {key: topology.kubernetes.io/zone, operator: In, values: [__ZONE__]}"
		if [[ -n "$aff" ]]; then
			awk -v z="$zaff" '{ print } /^      - matchExpressions:$/ { print z }' "$d/spec.yaml" >"$d/podspec.yaml"
		elif [[ -n "$anti" ]]; then
			awk -v z="$zaff" '{ print } /^affinity:$/ { print "  nodeAffinity:"
				print "    requiredDuringSchedulingIgnoredDuringExecution:"
				print "      nodeSelectorTerms:"; print "      - matchExpressions:"; print z }' \
				"$d/spec.yaml" >"$d/podspec.yaml"
		else
			{
				printf '%s\n' "affinity:" "  nodeAffinity:" "    requiredDuringSchedulingIgnoredDuringExecution:" \
					"      nodeSelectorTerms:" "      - matchExpressions:" "$zaff"
				cat "$d/spec.yaml"
			} >"$d/podspec.yaml"
		fi
	fi
	{
		cat <<EOF
---
apiVersion: v1
kind: PodTemplate
metadata:
  name: $id
  labels: {diffbatch: "$b"}
template:
  metadata:
    labels: {app: $id}$tann
  spec:
EOF
		sed 's/^/    /' "$d/spec.yaml"
		cat <<EOF
---
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata:
  name: $id
  labels: {diffbatch: "$b"}
spec:
  provisioningClassName: check-capacity.autoscaling.x-k8s.io
  podSets:
  - podTemplateRef: {name: $id}
    count: $count
  parameters: {noRetry: "true"}
EOF
	} >"$d/request.yaml"
	for ((j = 0; j < count; j++)); do
		cat <<EOF
---
apiVersion: v1
kind: Pod
metadata:
  name: $id-p$j
  labels: {app: $id, diffbatch: "$b"}
spec:
EOF
		sed 's/^/  /' "$d/podspec.yaml"
	done >"$d/pods.yaml"
}

# zone_of ID ANSWER MSG: the zone a one-zone gang's pods get: the one
# provreqd booked (its details), else the one it said fits the most pods
# (the first of equals); "" when neither can be read.
zone_of() {
	local id=$1 ans=$2 msg=$3
	if [[ "$ans" == True/* ]]; then
		kubectl get provreq -n "$PR_NS" "$id" -o 'jsonpath={.status.provisioningClassDetails.topologyDomain}' |
			sed -n 's|^topology.kubernetes.io/zone=||p'
		return
	fi
	sed -n 's/.*pods that fit in each: //p' <<<"$msg" | tr ',' '\n' |
		sed -n 's|^ *topology.kubernetes.io/zone=\([a-z]*\): \([0-9]*\).*|\2 \1|p' |
		sort -s -k1,1nr | head -n 1 | cut -d' ' -f2
}

# batch_ready B WANT: WANT nodes of batch B are Ready and no longer carry
# the not-ready taint that admission put on them.
batch_ready() {
	local got
	got=$(kubectl get nodes -l "diffbatch=$1,$PR_GROUP_LABEL=$run" -o \
		'jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status} {.spec.taints[*].key}{"\n"}{end}' |
		grep '^True' | grep -vc 'node.kubernetes.io/not-ready' || true)
	[[ "$got" == "$2" ]]
}

# answers B: "name<TAB>status/reason<TAB>message" of every request of batch B.
answers() {
	kubectl get provreq -n "$PR_NS" -l "diffbatch=$1" -o \
		'jsonpath={range .items[*]}{.metadata.name}{"\t"}{.status.conditions[?(@.type=="Provisioned")].status}/{.status.conditions[?(@.type=="Provisioned")].reason}{"\t"}{.status.conditions[?(@.type=="Provisioned")].message}{"\n"}{end}'
}

all_answered() { [[ "$(answers "$1" | awk -F'\t' '$2 != "/"' | grep -c .)" == "$2" ]]; }

# placements B: "pod<TAB>nodeName<TAB>PodScheduled status/reason".
placements() {
	kubectl get pods -n "$PR_NS" -l "diffbatch=$1" -o \
		'jsonpath={range .items[*]}{.metadata.name}{"\t"}{.spec.nodeName}{"\t"}{.status.conditions[?(@.type=="PodScheduled")].status}/{.status.conditions[?(@.type=="PodScheduled")].reason}{"\n"}{end}'
}

# every pod of batch B is bound or Unschedulable, and there are WANT pods
all_settled() {
	[[ "$(placements "$1" | awk -F'\t' '$2 != "" || $3 == "False/Unschedulable"' | grep -c .)" == "$2" ]]
}

# shellcheck disable=SC2119 # no flags: check-capacity only, no cloud driver
pr_start
total=0 agree=0 disagree=0 problems=0
t_start=$SECONDS
for ((first = 0; first < NCASES; first += BATCH)); do
	b=$((first / BATCH))
	last=$((first + BATCH < NCASES ? first + BATCH : NCASES))
	nnodes=0 npods=0
	: >"$PR_WORK/nodes-$b.yaml"
	: >"$PR_WORK/requests-$b.yaml"
	: >"$PR_WORK/pods-$b.yaml"
	for ((i = first; i < last; i++)); do
		gen_case "$i" "$b"
		d="$PR_WORK/cases/$run-c$i"
		cat "$d/nodes.yaml" >>"$PR_WORK/nodes-$b.yaml"
		cat "$d/request.yaml" >>"$PR_WORK/requests-$b.yaml"
		nnodes=$((nnodes + $(grep -c '^kind: Node$' "$d/nodes.yaml")))
		npods=$((npods + $(cat "$d/count")))
	done
	kubectl apply -f "$PR_WORK/nodes-$b.yaml" >/dev/null
	t_wait 60 "batch $b: $nnodes nodes Ready" batch_ready "$b" "$nnodes"
	kubectl apply -n "$PR_NS" -f "$PR_WORK/requests-$b.yaml" >/dev/null
	t_wait 60 "batch $b: $((last - first)) requests answered" all_answered "$b" $((last - first))
	answers "$b" >"$PR_WORK/answers-$b"
	for ((i = first; i < last; i++)); do
		id="$run-c$i"
		d="$PR_WORK/cases/$id"
		if [[ -f "$d/topo" ]]; then
			z=$(zone_of "$id" "$(awk -F'\t' -v n="$id" '$1 == n { print $2 }' "$PR_WORK/answers-$b")" \
				"$(awk -F'\t' -v n="$id" '$1 == n { print $3 }' "$PR_WORK/answers-$b")")
			echo "${z:-none}" >"$d/zone"
			sed -i "s/__ZONE__/${z:-none}/" "$d/pods.yaml"
		fi
		cat "$d/pods.yaml" >>"$PR_WORK/pods-$b.yaml"
	done
	kubectl delete provreq -n "$PR_NS" -l "diffbatch=$b" --wait=true >/dev/null
	kubectl apply -n "$PR_NS" -f "$PR_WORK/pods-$b.yaml" >/dev/null
	# Bounded: a pod still Pending without a verdict is reported with its
	# case (as neither bound nor a provreqd disagreement to ignore).
	t0=$SECONDS
	until all_settled "$b" "$npods"; do
		if ((SECONDS - t0 >= 30)); then
			t_log "batch $b: not every pod bound or Unschedulable after 30s"
			break
		fi
		sleep 0.5
	done
	t_log "batch $b: pods settled in $((SECONDS - t0))s"
	placements "$b" >"$PR_WORK/placements-$b"

	for ((i = first; i < last; i++)); do
		id="$run-c$i"
		d="$PR_WORK/cases/$id"
		y=$(cat "$d/count")
		ans=$(awk -F'\t' -v n="$id" '$1 == n { print $2 }' "$PR_WORK/answers-$b")
		msg=$(awk -F'\t' -v n="$id" '$1 == n { print $3 }' "$PR_WORK/answers-$b")
		bound=$(awk -F'\t' -v p="^$id-p[0-9]+\$" '$1 ~ p && $2 != ""' "$PR_WORK/placements-$b" | grep -c . || true)
		case "$ans" in
		True/CapacityIsFound) x=$y ;;
		False/CapacityIsNotFound)
			if [[ -f "$d/topo" ]]; then
				# what provreqd said fits in the zone the pods were given
				x=$(sed -n 's/.*pods that fit in each: //p' <<<"$msg" | tr ',' '\n' |
					sed -n "s|^ *topology.kubernetes.io/zone=$(cat "$d/zone"): \([0-9]*\).*|\1|p")
			else
				x=$(sed -n 's/^only \([0-9]*\) of \([0-9]*\) pods fit.*/\1 \2/p' <<<"$msg")
				if [[ "${x#* }" != "$y" ]]; then
					x=""
				else
					x=${x% *}
				fi
			fi
			;;
		*) x="" ;;
		esac
		total=$((total + 1))
		if [[ -n "$x" && "$x" == "$bound" ]]; then
			agree=$((agree + 1))
			t_log "case $i: agree, $bound of $y ($ans)$([[ -f "$d/topo" ]] && echo ", one zone: $(cat "$d/zone")")"
			continue
		fi
		[[ -n "$x" ]] || problems=$((problems + 1))
		disagree=$((disagree + 1))
		{
			echo "=== DISAGREEMENT: seed $SEED case $i (case seed $((SEED * 1000 + i)))"
			echo "provreqd: ${ans:-no answer}: ${msg:-} -> ${x:-unreadable} of $y"
			echo "kube-scheduler: $bound of $y bound"
			awk -F'\t' -v p="^$id-p[0-9]+\$" '$1 ~ p { print "  " $1 " -> " ($2 == "" ? "(" $3 ")" : $2) }' "$PR_WORK/placements-$b"
			echo "--- nodes"
			cat "$d/nodes.yaml"
			echo "--- pod spec (count $y)$([[ -f "$d/topo" ]] && echo ", a one-zone gang: zone $(cat "$d/zone")")"
			cat "$d/podspec.yaml"
			echo "==="
		} | tee -a "$PR_WORK/disagreements" >&2
	done

	kubectl delete pods -n "$PR_NS" -l "diffbatch=$b" --wait=true --timeout=60s >/dev/null
	kubectl delete nodes -l "diffbatch=$b,$PR_GROUP_LABEL=$run" --wait=true --timeout=60s >/dev/null
	t_wait 60 "batch $b: nodes gone" k_is "" '{.items[*].metadata.name}' nodes -l "diffbatch=$b,$PR_GROUP_LABEL=$run"
done
wall=$((SECONDS - t_start))

# What the cases exercised, so a run that drew few of a kind says so.
feat() {
	local n
	n=$(grep -l -e "$2" "$PR_WORK"/cases/*/"$3" 2>/dev/null | grep -c . || true)
	printf '%s=%s ' "$1" "$n"
}
t_log "cases with: $(feat tainted_node 'key: dedicated' nodes.yaml)$(feat toleration 'tolerations:' spec.yaml)$(feat ssd_selector '^  disk: ssd' spec.yaml)$(feat node_affinity_in 'operator: In,' spec.yaml)$(feat node_affinity_notin 'operator: NotIn' spec.yaml)$(feat anti_hostname 'topologyKey: kubernetes.io/hostname' spec.yaml)$(feat anti_zone '^      topologyKey: topology' spec.yaml)$(feat spread 'maxSkew' spec.yaml)$(feat taints_honor 'nodeTaintsPolicy: Honor' spec.yaml)$(feat taints_ignore 'nodeTaintsPolicy: Ignore' spec.yaml)$(feat affinity_honor 'nodeAffinityPolicy: Honor' spec.yaml)$(feat affinity_ignore 'nodeAffinityPolicy: Ignore' spec.yaml)$(feat min_domains 'minDomains' spec.yaml)$(feat host_port 'hostPort' spec.yaml)$(feat one_zone_gang 'podset-required-topology' request.yaml)"
t_log "provreqd answers: $(cat "$PR_WORK"/answers-* | awk -F'\t' '{ n[$2]++ } END { for (k in n) printf "%s=%d ", k, n[k] }')"

pct=$(awk -v a="$agree" -v t="$total" 'BEGIN { printf "%.1f\n", t ? 100 * a / t : 100 }')
echo "bench=scheduler_differential_cases value=$total"
echo "bench=scheduler_differential_agreement_pct value=$pct"
echo "bench=scheduler_differential_disagreements value=$disagree"
echo "bench=scheduler_differential_wall_s value=$wall"
t_log "seed $SEED: $agree of $total cases agree, $disagree disagree ($problems without a readable provreqd answer) in ${wall}s"
if ((disagree)); then
	t_log "--- every disagreement again (also on stderr above)"
	cat "$PR_WORK/disagreements"
fi
t_eq "provreqd and kube-scheduler agree on every case (seed $SEED)" 0 "$disagree"
t_done
