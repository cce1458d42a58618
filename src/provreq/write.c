/* The write stage: what the pass decided, sent (see docs/development.md,
 * "The pass"). Entry point: pr__write.
 *
 * Reads: the node marks and status writes the decide stage queued, the
 * world's node groups and marked nodes (scale-down).
 * Writes: Node marks (scaledown.c, pr__marks_flush), request statuses,
 * finalizers and their Events (status.c, pr__status_flush), whatever the
 * class modules do at the end of a pass (pass_end), and scale-down of the
 * idle nodes provreqd made (pr__scaledown). Each write checks the fence
 * first (pr__may_act). */
#include "provreq/ctl_int.h"
#include "provreq/scaledown.h"

void pr__write(pr_ctl *c, pr_world *w)
{
	pr__marks_flush(c);
	pr__status_flush(c);
	pr__ledger_tidy(c);
	pr__modules_hook(c, w, PR_HOOK_END);
	pr__scaledown(c, w);
}
