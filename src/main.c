/* provreqd command line. Each subcommand parses its own flags; this file
 * only dispatches and prints help. */
#include "config.h"
#include "cmd.h"

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <json-c/json.h>
#include <sqlite3.h>
#include <yaml.h>

static const char usage[] =
	"Usage: provreqd COMMAND [OPTIONS]\n"
	"\n"
	"provreqd serves Kubernetes ProvisioningRequests (autoscaling.x-k8s.io):\n"
	"check-capacity and atomic scale-up through loadable node-group drivers,\n"
	"and populates Capsule ResourcePool quotas from node capacity.\n"
	"\n"
	"Commands:\n"
	"  version        print the version and the library versions it was built with\n"
	"                 (-o json for tools)\n"
	"  run            serve ProvisioningRequests and ResourcePools against a cluster\n"
	"  simulate       run the controller on a cluster loaded from YAML, in simulated time\n"
	"  check-driver   load a cloud driver .so, check its ABI and list its node groups\n"
	"  check-config   validate a config file and flags; print the effective configuration\n"
	"  help [COMMAND] print this help, or COMMAND's\n"
	"\n"
	"Options:\n"
	"  -h, --help     print this help\n"
	"  -V, --version  print the version\n"
	"\n"
	"A command's options may come before its name too (provreqd --v=3 run).\n"
	"Run 'provreqd COMMAND --help' (or 'provreqd help COMMAND') for a command's\n"
	"options. Exit status: 0 success, 1 failure, 2 usage error (every command).\n"
	;

static const char version_usage[] =
	"Usage: provreqd version [-o text|json]\n"
	"\n"
	"Print the version and the versions of the libraries it was built with;\n"
	"-o json prints {\"version\": ..., \"libraries\": {...}}.\n";

static void print_version_json(void)
{
	json_object *o = json_object_new_object(), *l = json_object_new_object();
	json_object_object_add(o, "version", json_object_new_string(PACKAGE_VERSION));
	json_object_object_add(l, "libcurl", json_object_new_string(curl_version_info(CURLVERSION_NOW)->version));
	json_object_object_add(l, "json-c", json_object_new_string(json_c_version()));
	json_object_object_add(l, "libyaml", json_object_new_string(yaml_get_version_string()));
	json_object_object_add(l, "sqlite", json_object_new_string(sqlite3_libversion()));
	json_object_object_add(o, "libraries", l);
	printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
							   JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
}

/* `version [-o text|json]`; argv[0] is the command name. */
static int cmd_version(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	bool json = false;
	int c;

	optind = 0;
	while(argc > 1 && (c = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
		if(c == 'h') {
			fputs(version_usage, stdout);
			return 0;
		}
		if(c != 'o' || (strcmp(optarg, "json") && strcmp(optarg, "text"))) {
			if(c == 'o')
				fprintf(stderr, "provreqd version: -o: '%s' is not text or json\n", optarg);
			fputs(version_usage, stderr);
			return 2;
		}
		json = !strcmp(optarg, "json");
	}
	if(argc > 1 && optind != argc) {
		fprintf(stderr, "provreqd version: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if(json) {
		print_version_json();
		return 0;
	}
	printf("provreqd %s\n", PACKAGE_VERSION);
	printf("  libcurl %s\n", curl_version_info(CURLVERSION_NOW)->version);
	printf("  json-c %s\n", json_c_version());
	printf("  libyaml %s\n", yaml_get_version_string());
	printf("  sqlite %s\n", sqlite3_libversion());
	return 0;
}

typedef int (*cmd_fn)(int argc, char **argv);

static const struct {
	const char *name;
	cmd_fn fn;
} commands[] = {
	{ "version", cmd_version },
	{ "run", cmd_run },
	{ "simulate", cmd_simulate },
	{ "check-driver", cmd_check_driver },
	{ "check-config", cmd_check_config },
};

static cmd_fn find_command(const char *name)
{
	size_t i;
	for(i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if(!strcmp(commands[i].name, name))
			return commands[i].fn;
	return NULL;
}

/* `help [COMMAND]`: the command's own --help, so the two never differ. */
static int cmd_help(int argc, char **argv)
{
	char *args[3];
	cmd_fn fn;
	if(argc == 1) {
		fputs(usage, stdout);
		return 0;
	}
	if(argc > 2 || !strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		if(argc == 2) {
			fputs(usage, stdout);
			return 0;
		}
		fputs("provreqd help: one COMMAND at most (see provreqd --help)\n", stderr);
		return 2;
	}
	if(!(fn = find_command(argv[1]))) {
		fprintf(stderr, "provreqd help: unknown command '%s' (see provreqd --help)\n", argv[1]);
		return 2;
	}
	args[0] = argv[1];
	args[1] = (char *)"--help";
	args[2] = NULL;
	return fn(2, args);
}

/* Global options before the command: -h/--help and -V/--version (exact
 * words; getopt_long would take `--v=3` for an abbreviation of
 * --version). Any other option there belongs to the command and is moved
 * after its name, so `provreqd --v=3 run` is `provreqd run --v=3`. An
 * option without "=" takes the next word as its value unless that word is
 * a command or another option. */
int main(int argc, char **argv)
{
	char **args;
	int i, n = 0, cmd = -1, rc;

	for(i = 1; i < argc && cmd < 0; i++) {
		const char *a = argv[i];
		if(!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(usage, stdout);
			return 0;
		}
		if(!strcmp(a, "-V") || !strcmp(a, "--version"))
			return cmd_version(1, argv);
		if(!strcmp(a, "--")) {
			cmd = i + 1 < argc ? i + 1 : -2;
			break;
		}
		if(a[0] != '-' || !a[1])
			cmd = i;
		else if(!strchr(a, '=') && i + 1 < argc && argv[i + 1][0] != '-' && strcmp(argv[i + 1], "help") &&
			!find_command(argv[i + 1]))
			i++;
	}
	if(cmd < 0) {
		if(argc > 1)
			fprintf(stderr, "provreqd: no COMMAND after '%s' (see provreqd --help)\n", argv[argc - 1]);
		else
			fputs(usage, stderr);
		return 2;
	}
	if(!strcmp(argv[cmd], "help")) {
		if(cmd > 1 && argv[1][0] == '-') {
			fprintf(stderr, "provreqd: '%s' before help: help takes no options (see provreqd --help)\n", argv[1]);
			return 2;
		}
		return cmd_help(argc - cmd, argv + cmd);
	}
	if(!find_command(argv[cmd])) {
		fprintf(stderr, "provreqd: unknown command '%s' (see provreqd --help)\n", argv[cmd]);
		return 2;
	}
	/* command, the options given before it, then the rest */
	args = calloc((size_t)argc + 1, sizeof(*args));
	if(!args) {
		fputs("provreqd: out of memory\n", stderr);
		return 1;
	}
	args[n++] = argv[cmd];
	for(i = 1; i < cmd; i++)
		if(strcmp(argv[i], "--"))
			args[n++] = argv[i];
	for(i = cmd + 1; i < argc; i++)
		args[n++] = argv[i];
	args[n] = NULL;
	rc = find_command(argv[cmd])(n, args);
	free(args);
	return rc;
}
