/* Subcommands of the provreqd binary. Each takes the arguments after the
 * command name (argv[0] is the command) and returns the exit status. */
#ifndef PRD_CMD_H
#define PRD_CMD_H

int cmd_check_driver(int argc, char **argv);
int cmd_check_config(int argc, char **argv);
int cmd_simulate(int argc, char **argv);
int cmd_run(int argc, char **argv);

#endif
