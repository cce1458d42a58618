/* provreqd command line. Each subcommand parses its own flags; this file
 * only dispatches and prints help. */
#include "config.h"
#include "cmd.h"

#include <getopt.h>
#include <stdio.h>
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
	"  run            serve ProvisioningRequests and ResourcePools against a cluster\n"
	"  simulate       run the controller on a cluster loaded from YAML, in simulated time\n"
	"  check-driver   load a cloud driver .so, check its ABI and list its node groups\n"
	"  check-config   validate a config file and flags; print the effective configuration\n"
	"  help           print this help\n"
	"\n"
	"Options:\n"
	"  -h, --help     print this help\n"
	"  -V, --version  print the version\n"
	"\n"
	"Run 'provreqd COMMAND --help' for a command's options.\n"
	;

static int cmd_version(void)
{
	printf("provreqd %s\n", PACKAGE_VERSION);
	printf("  libcurl %s\n", curl_version_info(CURLVERSION_NOW)->version);
	printf("  json-c %s\n", json_c_version());
	printf("  libyaml %s\n", yaml_get_version_string());
	printf("  sqlite %s\n", sqlite3_libversion());
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};
	int c;

	/* Options before the command are global; stop at the first non-option. */
	while((c = getopt_long(argc, argv, "+hV", opts, NULL)) != -1) {
		switch(c) {
		case 'h':
			fputs(usage, stdout);
			return 0;
		case 'V':
			return cmd_version();
		default:
			fputs(usage, stderr);
			return 2;
		}
	}
	if(optind >= argc) {
		fputs(usage, stderr);
		return 2;
	}
	if(!strcmp(argv[optind], "version"))
		return cmd_version();
	if(!strcmp(argv[optind], "run"))
		return cmd_run(argc - optind, argv + optind);
	if(!strcmp(argv[optind], "simulate"))
		return cmd_simulate(argc - optind, argv + optind);
	if(!strcmp(argv[optind], "check-driver"))
		return cmd_check_driver(argc - optind, argv + optind);
	if(!strcmp(argv[optind], "check-config"))
		return cmd_check_config(argc - optind, argv + optind);
	if(!strcmp(argv[optind], "help")) {
		fputs(usage, stdout);
		return 0;
	}
	fprintf(stderr, "provreqd: unknown command '%s' (see provreqd --help)\n", argv[optind]);
	return 2;
}
