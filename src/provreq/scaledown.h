/* Scale-down of the nodes provreqd added, when nobody uses them. */
#ifndef PRD_PROVREQ_SCALEDOWN_H
#define PRD_PROVREQ_SCALEDOWN_H

#include "provreq/ctl_int.h"

#define PR_ANN_PROVISIONED_FOR "provreqd.io/provisioned-for"
#define PR_ANN_PROVISIONED_FOR_UID "provreqd.io/provisioned-for-uid"
#define PR_ANN_SCALE_DOWN_CORDONED "provreqd.io/scale-down-cordoned"
#define PR_ANN_SCALE_DOWN_DISABLED "provreqd.io/scale-down-disabled"
/* The owner token a driver with PRD_CLOUD_CAP_OWNER_MARK stamps on the
 * Nodes it creates (kwok; Karpenter through the NodeClaim's labels):
 * pr_owner_token of the plan's intent id, "<request uid>.<time>-<i>". */
#define PR_LABEL_OWNER "provreqd.io/owner"

/* The uid of the request whose plan made the node, or NULL when no plan of
 * provreqd's did: the provisioned-for-uid annotation (written on success
 * for clouds that cannot mark their nodes) or, else, the request uid the
 * owner label names (written on creation). *by_label says which. The
 * answer points into `n` or into `out`. */
const char *pr__node_made_for(const kube_node *n, char *out, size_t len, bool *by_label);

/* While the world is read: remember a node provreqd marked. */
int pr__scaledown_digest(pr_world *w, const kube_node *n);
/* Order of w->marked (by name; scale-down looks nodes up in it). */
int pr__marked_cmp(const void *a, const void *b);
/* Does this pod keep its node from being scaled down? */
bool pr__pod_blocks_scaledown(const kube_pod *p);
/* Mark a node as made for the request (annotations), written by
 * pr__marks_flush at the end of the pass (before the status writes);
 * nothing to write when the node's owner label (stamped when the cloud
 * created it) already names the request. */
void pr__mark_node(pr_ctl *c, pr_world *w, const kube_provreq *pr, const char *node);
/* Write the pass's marks, cfg.status_writers at a time; a failure is
 * logged (the node is then never scaled down). */
void pr__marks_flush(pr_ctl *c);
/* Drop the marks not written (the list's memory stays for the next pass). */
void pr__marks_discard(pr_ctl *c);
/* Cordon and remove idle marked nodes. */
void pr__scaledown(pr_ctl *c, pr_world *w);

#endif
