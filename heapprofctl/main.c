// SPDX-License-Identifier: GPL-2.0
/*
 * heapprofctl: the user's command. `record` runs a program under the client
 * and writes its profile when it exits; when no heapprofd is reachable it
 * starts a private one for this recording (module when /dev/heapprofd is
 * usable, user-space transport otherwise) and says which. See heapprofctl(1).
 * The subcommands live in the files heapprofctl.h lists.
 */
#include "heapprofctl.h"
/* ------------------------------------------------------------------ */

static void usage(FILE *f)
{
	fprintf(f,
"usage: heapprofctl COMMAND [options]\n"
"  record [-i BYTES] [-o PREFIX] [--dump-at-max] [--continuous-dump MS]\n"
"         [--follow-forks] [--no-block] [--heaps NAME,...] [--name NAME | --all]\n"
"         [-d SECS] [--stack-cap BYTES] [--top N]\n"
"         [-- COMMAND ARGS...]\n"
"                        run COMMAND under the profiler; write PREFIX.pb.gz,\n"
"                        .svg, .folded, .txt when it exits (default out/NAME);\n"
"                        with --continuous-dump also PREFIX.timeline.svg;\n"
"                        --format LIST (pprof,folded,text,svg,otlp) the files,\n"
"                        --export otlp=URL | pyroscope=URL also sends each dump;\n"
"                        --dump-on-pressure PCT dumps past PCT%% of its cgroup's\n"
"                        memory.max; killed by the OOM killer: PREFIX.oom.*\n"
"  attach PID [-d SECS] [-o PREFIX] [-i BYTES]\n"
"                        profile a running process until SECS or Ctrl-C; one\n"
"                        started without the client has it loaded (ptrace)\n"
"  dump PID              write a profile of a process being profiled now\n"
"  detach PID            stop profiling it and write its profile\n"
"  sessions              processes the daemon knows\n"
"  stats                 the module's statistics (/sys/kernel/heapprofd)\n"
"  dmabuf [-a | -b] [-o csv] [PID]   DMA-BUFs per process (-a: by buffer and\n"
"                        process, -b: buffers and exporters)\n"
"  gpu [-o csv] [PID]    GPU memory per process (DRM fdinfo) and per GPU\n"
"  meminfo [-o csv|json] the system's memory, lost RAM term by term\n"
"  monitor [-d SECS]     the module's events (sessions, DMA-BUFs, GPU) as they come\n"
"  report FILE [--top N] [--svg OUT] [--folded] [--base OTHER]\n"
"  report --timeline OUT.svg [--timeline-csv OUT.csv|-] [--top N] PREFIX|FILE...\n"
"                        memory over time from --continuous-dump's dumps\n"
"  symbolize FILE [-o OUT]\n"
"  install-preload       put the dormant client into /etc/ld.so.preload\n"
"  uninstall-preload     take it out again\n"
"common options: -v (progress and details), --transport auto|kernel|socket\n"
"See heapprofctl(1).\n");
}

/* --format pprof,svg: names from the table of formats (formats.h). */
static void format_opt(struct rec_opts *o, const char *arg)
{
	char why[400];

	if (hp_formats_parse(arg, &o->formats, why, sizeof(why)))
		die("--format: %s", why);
}

/* --export otlp=URL / pyroscope=URL, repeatable; the daemon checks them too. */
static void export_opt(struct rec_opts *o, const char *arg)
{
	size_t n = strlen(o->exports);

	const char *url = strchr(arg, '=');

	if (!url || (strncmp(arg, "otlp=", 5) && strncmp(arg, "pyroscope=", 10)))
		die("--export %s: say what to send and where: otlp=URL or pyroscope=URL", arg);
	if ((strncmp(url + 1, "http://", 7) && strncmp(url + 1, "https://", 8)) ||
	    strpbrk(url, " \t\n\r"))
		die("--export %s: the URL must start with http:// or https:// and hold no space", arg);
	if (n + strlen(arg) + 2 > sizeof(o->exports))
		die("--export: too many or too long");
	snprintf(o->exports + n, sizeof(o->exports) - n, "%s%s", n ? " " : "", arg);
}

static int run(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "interval", required_argument, NULL, 'i' },
		{ "output", required_argument, NULL, 'o' },
		{ "dump-at-max", no_argument, NULL, 'M' },
		{ "continuous-dump", required_argument, NULL, 'C' },
		{ "follow-forks", no_argument, NULL, 'F' },
		{ "name", required_argument, NULL, 'n' },
		{ "all", no_argument, NULL, 'A' },
		{ "duration", required_argument, NULL, 'd' },
		{ "transport", required_argument, NULL, 'T' },
		{ "stack-cap", required_argument, NULL, 'S' },
		{ "top", required_argument, NULL, 't' },
		{ "block", no_argument, NULL, 'B' },
		{ "no-block", no_argument, NULL, 'D' },
		{ "heaps", required_argument, NULL, 'H' },
		{ "format", required_argument, NULL, 'f' },
		{ "export", required_argument, NULL, 'E' },
		{ "dump-on-pressure", required_argument, NULL, 'P' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct rec_opts o = { .top = 20 };
	const char *cmd;
	int opt;

	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	cmd = argv[1];
	if (!strcmp(cmd, "report"))
		return hp_report_main(argc - 1, argv + 1);
	if (!strcmp(cmd, "symbolize"))
		return hp_symbolize_main(argc - 1, argv + 1);
	if (!strcmp(cmd, "dmabuf"))
		return hp_dmabuf_main(argc - 1, argv + 1);
	if (!strcmp(cmd, "gpu"))
		return hp_gpu_main(argc - 1, argv + 1);
	if (!strcmp(cmd, "meminfo"))
		return hp_meminfo_main(argc - 1, argv + 1);
	if (!strcmp(cmd, "monitor"))
		return hp_monitor_main(argc - 1, argv + 1);

	optind = 2;
	while ((opt = getopt_long(argc, argv, "+i:o:d:vh", lo, NULL)) != -1) {
		switch (opt) {
		case 'i': o.interval = num_opt("-i (bytes)", optarg, 1, MAX_INTERVAL); break;
		case 'o': o.out = out_opt(optarg); break;
		case 'M': o.dump_at_max = 1; break;
		case 'C': o.continuous = (unsigned)num_opt("--continuous-dump (ms)", optarg, 0, UINT_MAX);
			break;
		case 'F': o.follow = 1; break;
		case 'n': o.name = optarg; break;
		case 'A': o.all = 1; break;
		case 'd': o.duration = (unsigned)num_opt("-d (seconds)", optarg, 0, MAX_SECS); break;
		case 'T':
			o.want = !strcmp(optarg, "kernel") ? 1 : !strcmp(optarg, "socket") ? 2 :
				 !strcmp(optarg, "auto") ? 0 : -1;
			if (o.want < 0)
				die("--transport must be auto, kernel or socket");
			break;
		case 'S': o.stack_cap = (unsigned)num_opt("--stack-cap (bytes)", optarg, 0, MAX_STACK_CAP);
			break;
		case 't': o.top = (int)num_opt("--top", optarg, 0, INT_MAX); break;
		case 'B': o.drop = 0; break;	/* the default: wait for room */
		case 'D': o.drop = 1; break;
		case 'H': o.heaps = optarg; break;
		case 'f': format_opt(&o, optarg); break;
		case 'E': export_opt(&o, optarg); break;
		case 'P': o.pressure = (unsigned)num_opt("--dump-on-pressure (%)", optarg, 1, 100); break;
		case 'v': verbose++; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	progress = verbose || isatty(2);
	if (!strcmp(cmd, "record"))
		return do_record(&o, argv + optind);
	if (!strcmp(cmd, "attach") || !strcmp(cmd, "dump") || !strcmp(cmd, "detach")) {
		int pid;

		if (optind >= argc)
			die("%s: which process? usage: heapprofctl %s PID", cmd, cmd);
		pid = (int)num_opt("PID", argv[optind], 1, INT_MAX);
		/* Options may also follow the pid. */
		optind++;
		while ((opt = getopt_long(argc, argv, "+i:o:d:vh", lo, NULL)) != -1) {
			switch (opt) {
			case 'i': o.interval = num_opt("-i (bytes)", optarg, 1, MAX_INTERVAL); break;
			case 'o': o.out = out_opt(optarg); break;
			case 'd': o.duration = (unsigned)num_opt("-d (seconds)", optarg, 0, MAX_SECS); break;
			case 'v': verbose++; break;
			default: usage(stderr); return 2;
			}
		}
		if (!strcmp(cmd, "attach"))
			return do_attach(pid, o.duration, o.out, o.interval, o.want);
		return simple_request(cmd, pid);
	}
	if (!strcmp(cmd, "sessions"))
		return do_sessions();
	if (!strcmp(cmd, "stats"))
		return hp_stats_main(getenv("HEAPPROFD_SYSFS") ? getenv("HEAPPROFD_SYSFS") : HP_SYSFS_ROOT);
	if (!strcmp(cmd, "install-preload"))
		return do_install_preload(1);
	if (!strcmp(cmd, "uninstall-preload"))
		return do_install_preload(0);
	fprintf(stderr, "%s: unknown command '%s'\n", prog, cmd);
	usage(stderr);
	return 2;
}

/*
 * Everything heapprofctl prints goes through hp_printable_stream(): names
 * and text that other processes chose (and that the places printing them
 * have made printable already) cannot send a terminal an escape sequence
 * by a path nobody thought of. Only our own progress line writes to the
 * terminal directly (its carriage return).
 */
FILE *raw_stderr;

static void printable_output(void)
{
	FILE *out = hp_printable_stream(stdout), *err;

	raw_stderr = stderr;
	err = hp_printable_stream(stderr);
	if (!out || !err) {
		fprintf(stderr, "%s: cannot set up the output: %s\n", prog, strerror(errno));
		exit(1);
	}
	setvbuf(out, NULL, isatty(STDOUT_FILENO) ? _IOLBF : _IOFBF, BUFSIZ);
	setvbuf(err, NULL, _IONBF, 0);
	stdout = out;
	stderr = err;
}

int main(int argc, char **argv)
{
	int rc;

	printable_output();
	rc = run(argc, argv);

	/* `heapprofctl sessions > /dev/full`: output lost is a failure. */
	errno = 0;
	if (fflush(stdout) || ferror(stdout)) {
		fprintf(stderr, "%s: writing to standard output: %s\n", prog,
			errno ? strerror(errno) : "write error");
		return rc ? rc : 1;
	}
	return rc;
}
