/* For tests/unit/test_docs.sh: reads lines "CONDITION STATUS REASON" on
 * stdin and prints each back with the Event type the controller records
 * for that transition (pr_event_type in src/provreq/host.c), so the docs
 * check compares the user guide with the code rather than with a copy. */
#include "provreq/controller.h"

#include <stdio.h>

int main(void)
{
	char type[128], status[16], reason[128];
	while(scanf("%127s %15s %127s", type, status, reason) == 3)
		printf("%s %s %s %s\n", type, status, reason, pr_event_type(type, status, reason));
	return ferror(stdin) ? 1 : 0;
}
