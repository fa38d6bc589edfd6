// SPDX-License-Identifier: GPL-2.0
/*
 * heapprofctl record: run a program under the client and write its profile
 * when it exits.
 */
#include "heapprofctl.h"
/* ------------------------------------------------------------------ */
/* record                                                             */
/* ------------------------------------------------------------------ */


/* -o: a prefix for files, not empty and not a directory's name. */
const char *out_opt(const char *arg)
{
	size_t n = strlen(arg);

	if (!n) {
		fprintf(stderr, "%s: -o: an empty name; give a prefix for the profile files (e.g. -o out/myprog)\n",
			prog);
		exit(2);
	}
	if (arg[n - 1] == '/') {
		fprintf(stderr, "%s: -o %s: names a directory; give a prefix for the files in it (e.g. -o %sNAME)\n",
			prog, arg, arg);
		exit(2);
	}
	return out_prefix(arg);
}

/* The directory part of PREFIX ("." or "/" when it has none). */
static void prefix_dir(const char *prefix, char *dir, size_t len)
{
	const char *slash = strrchr(prefix, '/');

	if (!slash || slash == prefix)
		snprintf(dir, len, "%s", slash ? "/" : ".");
	else
		snprintf(dir, len, "%.*s", (int)(slash - prefix), prefix);
}

/*
 * Before anything runs: the directory of PREFIX is there (mkdirs_for made
 * it), reached through no symbolic link another user controls (the
 * daemon, writing, opens it the same way: hp_out_dir_open) and writable,
 * PREFIX itself is no directory, and none of the files is something other
 * than a regular file (the daemon would refuse it).
 */
void check_output(const char *prefix)
{
	char dir[PATH_MAX], name[PATH_MAX + 16], why[PATH_MAX + 300];
	const char *base = strrchr(prefix, '/') ? strrchr(prefix, '/') + 1 : prefix;
	struct stat st;
	int dfd;

	prefix_dir(prefix, dir, sizeof(dir));
	dfd = hp_out_dir_open(dir, 0, why, sizeof(why));
	if (dfd < 0)
		die("cannot write the profile to %s.*: %s%s", prefix, why,
		    dfd == -ENOENT ? " and could not be created" : "");
	if (faccessat(dfd, ".", W_OK, 0) < 0)
		die("cannot write the profile to %s.*: directory %s: %s", prefix, dir, strerror(errno));
	if (!fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) && S_ISDIR(st.st_mode))
		die("-o %s: is a directory; give a prefix for the files in it (e.g. -o %s/NAME)", prefix,
		    prefix);
	for (size_t k = 0; k < N_OUT_EXT; k++) {
		snprintf(name, sizeof(name), "%s%s", base, out_ext[k]);
		if (!fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) && !S_ISREG(st.st_mode))
			die("cannot write the profile to %s%s: it exists and is not a regular file (%s)",
			    prefix, out_ext[k], S_ISLNK(st.st_mode) ? "a symbolic link" :
			    S_ISDIR(st.st_mode) ? "a directory" : "a special file");
	}
	close(dfd);
}

/* The directory of PREFIX and those above it, made where missing, by the
 * same walk (no link another user controls followed): check_output says
 * what failed. */
void mkdirs_for(const char *prefix)
{
	char dir[PATH_MAX], why[PATH_MAX + 300];
	int dfd;

	prefix_dir(prefix, dir, sizeof(dir));
	dfd = hp_out_dir_open(dir, 0755, why, sizeof(why));
	if (dfd >= 0)
		close(dfd);
}

/* An absolute prefix: a system daemon does not share our cwd. */
void abs_prefix(const char *in, char *out, size_t len)
{
	char cwd[PATH_MAX];

	if (in[0] == '/') {
		if (snprintf(out, len, "%s", in) >= (int)len)
			die("path too long: %s", in);
		return;
	}
	if (!getcwd(cwd, sizeof(cwd)))
		die("-o %s: the current directory cannot be named (%s); give an absolute path",
		    in, strerror(errno));
	if (snprintf(out, len, "%s/%s", cwd, in) >= (int)len)
		die("path too long: %s", in);
}

static void setenv_prepend(const char *var, const char *val)
{
	const char *old = getenv(var);
	char buf[8192];

	if (old && *old) {
		snprintf(buf, sizeof(buf), "%s:%s", val, old);
		setenv(var, buf, 1);
	} else {
		setenv(var, val, 1);
	}
}

static void child_env(const struct rec_opts *o, const struct daemon *d, int dormant)
{
	char lib[PATH_MAX], v[32];

	client_lib(lib, sizeof(lib));
	setenv_prepend("LD_PRELOAD", lib);
	snprintf(v, sizeof(v), "%llu", o->interval);
	setenv("HEAPPROFD_INTERVAL", v, 1);
	if (o->stack_cap) {
		snprintf(v, sizeof(v), "%u", o->stack_cap);
		setenv("HEAPPROFD_STACK_CAP", v, 1);
	}
	if (d->socket[0])
		setenv("HEAPPROFD_SOCKET", d->socket, 1);
	/*
	 * The user asked for this program to be profiled, by a daemon that
	 * was checked to answer: wait for it longer than the 200 ms a program
	 * preloaded with the client gives any daemon (a loaded machine).
	 */
	setenv("HEAPPROFD_HELLO_TIMEOUT_MS", "10000", 0);
	if (!strcmp(d->transport, "socket") || o->want == 2)
		setenv("HEAPPROFD_TRANSPORT", "socket", 1);
	else if (!strcmp(d->transport, "kernel") || o->want == 1)
		setenv("HEAPPROFD_TRANSPORT", "kernel", 1);
	else
		setenv("HEAPPROFD_TRANSPORT", "auto", 1);
	/* The daemon's config decides; this is what the client starts with. */
	setenv("HEAPPROFD_BLOCK", o->drop ? "0" : "100000", 1);
	if (o->follow || dormant)
		setenv("HEAPPROFD_FOLLOW_FORKS", "1", 1);
	else
		unsetenv("HEAPPROFD_FOLLOW_FORKS");
	if (dormant)
		setenv("HEAPPROFD_DORMANT", "1", 1);
	else
		unsetenv("HEAPPROFD_DORMANT");
	/* Runs in the child: the recorded process and the images it execs
	 * keep the client; its descendants drop it unless following forks. */
	if (!dormant) {
		snprintf(v, sizeof(v), "%d", (int)getpid());
		setenv("HEAPPROFD_ROOT_PID", v, 1);
	} else {
		unsetenv("HEAPPROFD_ROOT_PID");
	}
}

/*
 * With --continuous-dump: each profile's memory over time, PREFIX.timeline.svg
 * beside it, from PREFIX.0001.pb.gz, ... and PREFIX.pb.gz.
 */
static int write_timelines(void)
{
	int bad = 0;

	for (int i = 0; i < nresults; i++) {
		struct result *r = &results[i];
		char svg[PATH_MAX + 16], *in[1] = { r->prefix };

		if (!r->done || !r->ok)
			continue;
		snprintf(svg, sizeof(svg), "%s.timeline.svg", r->prefix);
		if (hp_timeline_write(in, 1, svg, NULL, 8, NULL, prog))
			bad = 1;
	}
	fflush(stdout);
	return bad;
}

int do_record(struct rec_opts *o, char **cmd)
{
	char prefix[PATH_MAX], req[8192], rep[MSG_MAX];
	int gate[2], errp[2], sfd, child_status = 0, child_done = 0, sel = 0, rc, bad;
	uint64_t t_start, t_exit = 0, t_prog = 0;
	struct daemon d;
	sigset_t ss;
	pid_t child = 0;

	if (!cmd[0] && !o->name && !o->all)
		die("record: nothing to run; usage: heapprofctl record [options] -- COMMAND [ARGS...] (or --name NAME / --all)");
	if (o->all && !o->interval)
		o->interval = 512 * 1024;	/* whole system: bound the data */
	if (!o->interval)
		o->interval = 4096;
	if (o->interval == 1)
		o->drop = 0;	/* exact mode: wait for room rather than drop */
	if (o->out) {
		snprintf(prefix, sizeof(prefix), "%s", o->out);
	} else {
		char tmp[PATH_MAX];

		snprintf(tmp, sizeof(tmp), "%s", cmd[0] ? cmd[0] : o->name ? o->name : "all");
		snprintf(prefix, sizeof(prefix), "out/%s", basename(tmp));
	}
	{
		char a[PATH_MAX];

		abs_prefix(prefix, a, sizeof(a));
		snprintf(prefix, sizeof(prefix), "%s", a);
	}
	mkdirs_for(prefix);
	check_output(prefix);

	sigemptyset(&ss);
	sigaddset(&ss, SIGCHLD);
	sigaddset(&ss, SIGINT);
	sigaddset(&ss, SIGTERM);
	sigaddset(&ss, SIGQUIT);
	sigprocmask(SIG_BLOCK, &ss, NULL);
	sfd = signalfd(-1, &ss, SFD_CLOEXEC);

	on_event = record_event;
	reach_daemon(&d, 1, o->want);
	note("recording with the %s transport%s", !strncmp(d.transport, "kernel", 6) ?
	     "kernel (module)" : "user-space (socket)", d.private_pid ? " (private daemon)" : "");
	if ((o->name || o->all) && !cmd[0] && !hp_preload_present(HP_PRELOAD_FILE, HP_PRELOAD_LIB))
		note("no dormant client in %s: only processes started with the client preloaded can be profiled (see `heapprofctl install-preload`)",
		     HP_PRELOAD_FILE);

	if (cmd[0]) {
		if (pipe2(gate, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0)
			die("pipe: %s", strerror(errno));
		child = fork();
		if (child < 0)
			die("fork: %s", strerror(errno));
		if (child == 0) {
			char c;
			int e;

			close(gate[1]);
			close(errp[0]);
			/* Wait until the daemon knows our pid. */
			if (read(gate[0], &c, 1) != 1)
				_exit(126);
			child_env(o, &d, o->name || o->all);
			sigprocmask(SIG_UNBLOCK, &ss, NULL);
			execvp(cmd[0], cmd);
			e = errno;
			if (write(errp[1], &e, sizeof(e)) < 0)
				_exit(127);
			_exit(127);
		}
		close(gate[0]);
		close(errp[1]);
	}
	snprintf(req, sizeof(req), "watch");
	if (o->name || o->all) {
		if (o->name)
			hpc_put(req, sizeof(req), "name", o->name);
		hpc_putu(req, sizeof(req), "all", o->all);
		hpc_putu(req, sizeof(req), "dormant", 1);
	} else {
		hpc_putu(req, sizeof(req), "pid", child);
	}
	hpc_putu(req, sizeof(req), "follow", o->follow);
	hpc_putu(req, sizeof(req), "interval", o->interval);
	hpc_putu(req, sizeof(req), "stack_cap", o->stack_cap);
	hpc_putu(req, sizeof(req), "drop", o->drop);
	if (o->heaps)
		hpc_put(req, sizeof(req), "heaps", o->heaps);
	hpc_putu(req, sizeof(req), "dump_at_max", o->dump_at_max);
	hpc_putu(req, sizeof(req), "continuous", o->continuous);
	if (o->formats)
		hpc_putu(req, sizeof(req), "formats", o->formats);
	if (o->exports[0])
		hpc_put(req, sizeof(req), "export", o->exports);
	if (o->pressure)
		hpc_putu(req, sizeof(req), "pressure", o->pressure);
	hpc_put(req, sizeof(req), "prefix", prefix);
	if ((rc = request(&d, req, rep, sizeof(rep))) != 0) {
		char msg[800];

		no_answer(&d, rc, rep, msg, sizeof(msg));
		if (child)
			kill(child, SIGKILL);
		die("the daemon %s the recording: %s", rc > 0 ? "refused" : "did not start", msg);
	}
	if (child) {
		int e = 0;

		if (write(gate[1], "g", 1) != 1)
			die("cannot start the command");
		close(gate[1]);
		if (read(errp[0], &e, sizeof(e)) == sizeof(e)) {
			waitpid(child, NULL, 0);
			finish_daemon(&d);
			die("cannot run %s: %s", cmd[0], strerror(e));
		}
		close(errp[0]);
	}
	t_start = now_ms();
	if (o->name || o->all)
		note("profiling processes named %s%s; Ctrl-C ends the recording", o->name ? o->name : "*",
		     o->duration ? " for the given duration" : "");

	/* Wait: the command's exit, then every session's final dump. */
	for (;;) {
		struct pollfd pf[2] = { { d.fd, POLLIN, 0 }, { sfd, POLLIN, 0 } };
		uint64_t now = now_ms();
		int n;

		if (child_done && nlive <= 0) {
			/* Sessions may still be announced shortly after exit. */
			if (nresults || now - t_exit > 2000)
				break;
		}
		if (!cmd[0] && o->duration && now - t_start >= o->duration * 1000ULL)
			break;
		if (sel)
			break;	/* interrupted: closing the connection makes the daemon dump the rest */
		if (progress && now - t_prog >= 1000 && now - t_start >= 2000) {
			/* our own text: the one line with a carriage return */
			fprintf(raw_stderr, "\r%s: %llu s, %d process(es) being profiled%s ", prog,
				(unsigned long long)(now - t_start) / 1000, nlive,
				child_done ? ", writing profiles" : "");
			t_prog = now;
		}
		n = poll(pf, 2, 200);
		if (n < 0 && errno != EINTR)
			break;
		if (pf[0].revents & POLLIN) {
			if (recv_msg(d.fd, rep, sizeof(rep)) < 0) {
				note("lost the daemon: profiles may be incomplete");
				break;
			}
			if (hpc_verb_is(rep, "event"))
				record_event(rep);
		} else if (pf[0].revents & (POLLHUP | POLLERR)) {
			note("lost the daemon: profiles may be incomplete");
			break;
		}
		if (pf[1].revents & POLLIN) {
			struct signalfd_siginfo si;

			if (read(sfd, &si, sizeof(si)) != sizeof(si))
				continue;
			if (si.ssi_signo == SIGCHLD && child) {
				int st;

				while (waitpid(child, &st, WNOHANG) == child) {
					child_status = st;
					child_done = 1;
					t_exit = now_ms();
				}
			} else if (si.ssi_signo != SIGCHLD) {
				/* The terminal sent it to the command too; without one we end. */
				if (!cmd[0] || child_done)
					sel = 1;	/* e.g. forked children still running */
				else if (si.ssi_signo != SIGINT && si.ssi_signo != SIGQUIT)
					kill(child, (int)si.ssi_signo);
			}
		}
	}
	if (progress && t_prog)
		fputc('\n', raw_stderr);
	finish_daemon(&d);	/* a private daemon finishes the rest and exits */
	if (!nresults)
		note("no profile: %s never connected to heapprofd (a static binary, a setuid program, or LD_PRELOAD was dropped)",
		     cmd[0] ? cmd[0] : "no matching process");
	bad = show_results(o->top);
	if (o->continuous && write_timelines())
		bad = 1;
	/* The program's status; 1 when it succeeded but a profile was not written. */
	if (child_done && WIFEXITED(child_status) && WEXITSTATUS(child_status))
		return WEXITSTATUS(child_status);
	if (child_done && WIFSIGNALED(child_status))
		return 128 + WTERMSIG(child_status);
	if (bad)
		return 1;
	return nresults || child_done ? 0 : 1;
}
