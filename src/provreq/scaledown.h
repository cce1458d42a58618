/* Scale-down of the nodes provreqd added, when nobody uses them. */
#ifndef PRD_PROVREQ_SCALEDOWN_H
#define PRD_PROVREQ_SCALEDOWN_H

#include "provreq/ctl_int.h"

#define PR_ANN_PROVISIONED_FOR "provreqd.io/provisioned-for"
#define PR_ANN_PROVISIONED_FOR_UID "provreqd.io/provisioned-for-uid"
#define PR_ANN_SCALE_DOWN_CORDONED "provreqd.io/scale-down-cordoned"
#define PR_ANN_SCALE_DOWN_DISABLED "provreqd.io/scale-down-disabled"

/* While the world is read: remember a node provreqd marked. */
int pr__scaledown_digest(pr_world *w, const kube_node *n);
/* Order of w->marked (by name; scale-down looks nodes up in it). */
int pr__marked_cmp(const void *a, const void *b);
/* Does this pod keep its node from being scaled down? */
bool pr__pod_blocks_scaledown(const kube_pod *p);
/* Mark a node as made for the request (annotations), written by
 * pr__marks_flush at the end of the pass (before the status writes). */
void pr__mark_node(pr_ctl *c, const kube_provreq *pr, const char *node);
/* Write the pass's marks, cfg.status_writers at a time; a failure is
 * logged (the node is then never scaled down). */
void pr__marks_flush(pr_ctl *c);
/* Drop the marks not written (the list's memory stays for the next pass). */
void pr__marks_discard(pr_ctl *c);
/* Cordon and remove idle marked nodes. */
void pr__scaledown(pr_ctl *c, pr_world *w);

#endif
