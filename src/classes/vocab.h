/* The ProvisioningRequest vocabulary shared by the controller and the class
 * modules: class names, condition types, reasons and the
 * provisioningClassDetails keys provreqd writes. */
#ifndef PRD_CLASSES_VOCAB_H
#define PRD_CLASSES_VOCAB_H

#define PR_CLASS_CHECK "check-capacity.autoscaling.x-k8s.io"
#define PR_CLASS_ATOMIC "best-effort-atomic-scale-up.autoscaling.x-k8s.io"

/* Condition types. */
#define PR_COND_ACCEPTED "Accepted"
#define PR_COND_PROVISIONED "Provisioned"
#define PR_COND_FAILED "Failed"
#define PR_COND_BOOKING_EXPIRED "BookingExpired"
#define PR_COND_REVOKED "CapacityRevoked"

/* Reasons (upstream's names are kept). */
#define PR_R_ACCEPTED "Accepted"
#define PR_R_FOUND "CapacityIsFound"
#define PR_R_PROVISIONED "CapacityIsProvisioned"
#define PR_R_NOT_FOUND "CapacityIsNotFound"
#define PR_R_CHECK_FAILED "FailedToCheckCapacity"
#define PR_R_CREATE_PODS_FAILED "FailedToCreatePods"
#define PR_R_BOOK_FAILED "FailedToBookCapacity"
#define PR_R_RESERVATION_EXPIRED "CapacityReservationTimeExpired"
#define PR_R_CONSUMED "CapacityBookingConsumed"
#define PR_R_EXPIRED "Expired"
/* Reasons of our own, for situations upstream has no name for. */
#define PR_R_INVALID "InvalidRequest"
#define PR_R_NODES_REMOVED "BookedNodesRemoved"
#define PR_R_SCALING_UP "ScaleUpInProgress"
/* Provisioned=False while only scale-ups in flight keep the request out
 * (its group serves one plan at a time, or their nodes fill a limit): no
 * request backoff, decided again when a plan ends. The message begins
 * with PR_MSG_QUEUED and the group's name. */
#define PR_R_WAITING_SCALE_UP "WaitingForScaleUp"
#define PR_MSG_QUEUED "queued behind a scale-up in progress on node group"
#define PR_R_SCALE_UP_FAILED "ScaleUpFailed"
#define PR_R_DRIVER_ERROR "DriverError"
#define PR_R_SCALE_UP_ROLLED_BACK "ScaleUpRolledBack" /* an Event reason only */
/* Event reasons only: another actor met a plan. */
#define PR_R_SCALE_UP_REPLANNED "ScaleUpReplanned"     /* the target moved before the call: planning again */
#define PR_R_OTHER_ACTOR "OtherActorScaling"           /* foreign instances appeared in a plan's group */
#define PR_R_DUPLICATES_REMOVED "DuplicateInstancesRemoved" /* a repeated call's surplus deleted */
#define PR_R_SCALE_UP_RESUMED "ScaleUpResumed"         /* an interrupted increase continued */
#define PR_R_PLAN_REFUSED "ScaleUpPlanRefused"         /* a plan in the status failed validation */
#define PR_R_ROLLBACK_KEPT "RollbackKeptBusyInstances" /* a rollback keeps instances running others' pods */
#define PR_R_WAITING_TEMPLATES "PodTemplatesNotFound"
/* A request naming a ProvisioningClass (classes/pclass.h) it may not use:
 * the object is malformed or names a class nobody here serves, or the
 * request's namespace is not among its allowedNamespaces. */
#define PR_R_PCLASS_INVALID "InvalidProvisioningClass"
#define PR_R_NS_NOT_ALLOWED "NamespaceNotAllowed"
/* The namespace's ResourceQuotas (Capsule pool claims among them) would not
 * admit the request's pods: nothing is booked or bought (classes/quota.h). */
#define PR_R_QUOTA_EXCEEDED "QuotaExceeded"
/* The booking does not fit the records that must hold it (one object of
 * the booking ledger, the request's provisioningClassDetails): it fails
 * rather than wait for room that never comes (docs/operator.md, "The
 * booking ledger"). */
#define PR_R_BOOKING_TOO_LARGE "BookingTooLarge"

/* provisioningClassDetails keys of an atomic scale-up in progress: the
 * plan, so another replica can adopt it after a failover. */
#define PR_DETAIL_PLAN "scaleUpPlan"
#define PR_DETAIL_GROUP "nodeGroup"
#define PR_DETAIL_DELTA "nodesRequested"
#define PR_DETAIL_DEADLINE "nodesReadyDeadline"
/* Kept while an atomic plan is open (see src/classes/atomic.c). */
#define PR_DETAIL_TARGET_BEFORE "targetSizeBefore"
#define PR_DETAIL_PHASE "scaleUpPhase"
#define PR_DETAIL_KNOWN "provreqd.io/instances-before"
#define PR_DETAIL_PROGRESS "nodesProgress"
/* A plan split across groups: "podSet:group=pods,..." */
#define PR_DETAIL_PODSET_GROUPS "podSetNodeGroups"
/* The node group a plan auto-provisioned for the request. */
#define PR_DETAIL_NAP_GROUP "autoProvisionedNodeGroup"
/* What the groups a plan auto-provisions are (JSON: group id -> the
 * state store's record: driver, shape, zone, labels, taints, max, owner,
 * plan), so a new leader adopts a plan whose group is not created yet. */
#define PR_DETAIL_NAP_SPEC "provreqd.io/autoprovisioned-groups"
/* The leader term (lease holder and leaseTransitions) that made the plan. */
#define PR_DETAIL_TERM "provreqd.io/leader-term"
/* The keyed digest over the plan record above (src/classes/plan_seal.h):
 * a plan is adopted from a status, and a status is believed about a plan,
 * only when it verifies. */
#define PR_DETAIL_PLAN_SEAL "provreqd.io/plan-seal"
/* What a Provisioned request booked, per podSet and node, so a replica
 * that takes over the lease rebuilds the booking. */
#define PR_DETAIL_BOOKING "provreqd.io/booking"
/* The end of a leftover booking this controller released: written,
 * conditional on a status that shows no booking, before the room goes
 * back, so a late status write that booked it is refused (decide.c,
 * leftover_fenced). */
#define PR_DETAIL_RELEASE "provreqd.io/booking-released"
/* The room a request with a scale-up in flight holds on existing nodes
 * (PR_DETAIL_BOOKING) lasts this long past the plan's deadline; a plan ends
 * within it (a rollback gives the room back at once). */
#define PR_HOLD_MARGIN_NS (10LL * 60 * 1000000000LL)
/* Retry state, so a new leader does not retry early. */
#define PR_DETAIL_ATTEMPTS "provreqd.io/attempts"
#define PR_DETAIL_NEXT_ATTEMPT "provreqd.io/next-attempt"
/* The node-group backoff a failed scale-up caused: "group until-ns
 * failures", so a new leader does not retry the group early. */
#define PR_DETAIL_GROUP_BACKOFF "provreqd.io/node-group-backoff"
/* The one topology domain the request's gang was placed in ("LABEL=VALUE"),
 * for a request whose PodTemplates carry Kueue's podset topology
 * annotations (src/provreq/topology_use.c). */
#define PR_DETAIL_TOPOLOGY "topologyDomain"
/* ... and VALUE alone, for Kueue's podSetUpdates (a nodeSelector's value
 * valueFromProvisioningClassDetail). */
#define PR_DETAIL_TOPOLOGY_VALUE "topologyDomainValue"
#define PR_ANN_REQUIRED_TOPOLOGY "kueue.x-k8s.io/podset-required-topology"
#define PR_ANN_PREFERRED_TOPOLOGY "kueue.x-k8s.io/podset-preferred-topology"
/* A request served through a ProvisioningClass: the object's name and the
 * parameters in effect (a JSON object, keys in order). */
#define PR_DETAIL_PCLASS "provisioningClass"
#define PR_DETAIL_EFFECTIVE_PARAMS "effectiveParameters"

#endif
