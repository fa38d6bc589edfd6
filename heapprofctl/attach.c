// SPDX-License-Identifier: GPL-2.0
/*
 * heapprofctl attach, dump, detach and sessions: requests about processes
 * that are running already.
 */
#include "heapprofctl.h"
#include "inject.h"

/*
 * While heapprofctl works inside a process, the signals that end it are
 * caught, not obeyed: the handler only notes one (inject_cancelled asks at
 * every step), and any system call it interrupts returns EINTR. Ctrl-C then
 * ends the attach at once, the process let go as it was, or with the call
 * made in it finishing on its own; the signal is raised again afterwards.
 */
static const int term_sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
#define NTERM (sizeof(term_sigs) / sizeof(term_sigs[0]))
static volatile sig_atomic_t term_caught;

struct held_term {
	sigset_t mask;
	struct sigaction act[NTERM];
};

static void on_term(int sig)
{
	term_caught = sig;
}

static int term_pending(void)
{
	return term_caught != 0;
}

static void hold_termination(struct held_term *h)
{
	struct sigaction sa;
	sigset_t un;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_term;	/* no SA_RESTART */
	sigemptyset(&un);
	term_caught = 0;
	for (size_t i = 0; i < NTERM; i++) {
		sigaction(term_sigs[i], &sa, &h->act[i]);
		sigaddset(&un, term_sigs[i]);
	}
	sigprocmask(SIG_UNBLOCK, &un, &h->mask);
	inject_cancelled = term_pending;
}

static void release_termination(struct held_term *h)
{
	sigprocmask(SIG_SETMASK, &h->mask, NULL);
	for (size_t i = 0; i < NTERM; i++)
		sigaction(term_sigs[i], &h->act[i], NULL);
	inject_cancelled = NULL;
	if (term_caught)
		raise(term_caught);	/* blocked (attach's signalfd) or default */
}

/*
 * A process started without the client: load it into the process (inject.c)
 * with a dormant session on the transport this daemon serves, which the
 * attach request then enables. 1 when it was loaded so, 0 when the client
 * was preloaded already (the usual attach); dies with the reason otherwise.
 */
static int load_client(struct daemon *d, int pid, unsigned long long interval, int want)
{
	char lib[PATH_MAX], real[PATH_MAX], cfg[PATH_MAX + 128], err[1024];
	const char *tr = want == 1 ? "kernel" : want == 2 ? "socket" :
			 !strcmp(d->transport, "kernel") ? "kernel" :
			 !strcmp(d->transport, "socket") ? "socket" : "auto";
	struct inject_times it;
	struct held_term old;
	int rc;

	client_lib(lib, sizeof(lib));
	if (!realpath(lib, real))
		snprintf(real, sizeof(real), "%s", lib);
	snprintf(cfg, sizeof(cfg), "transport=%s interval=%llu%s%s%s", tr, interval,
		 d->socket[0] ? " socket=" : "", d->socket, verbose > 2 ? " debug=1" : "");
	hold_termination(&old);
	rc = hp_inject_attach(pid, real, cfg, &it, err, sizeof(err));
	if (rc < 0) {
		inject_cancelled = NULL;
		finish_daemon(d);
		die("attach %d: %s", pid, err);
	}
	release_termination(&old);
	if (rc == 0 && verbose)
		note("loaded the client into pid %d (stopped for %llu us, %d look%s for a safe point)",
		     pid, (unsigned long long)it.stopped_us, it.tries, it.tries == 1 ? "" : "s");
	if (rc == 0 && verbose > 1)
		note("stopped: %llu us stopping the threads, %llu us finding a safe point, "
		     "%llu us in dlopen, %llu us in heapprofd_client_attach",
		     (unsigned long long)it.stop_us, (unsigned long long)it.safe_us,
		     (unsigned long long)it.dlopen_us, (unsigned long long)it.call_us);
	return rc == 0;
}

/* Take the hooks of a client loaded by attach out again; 0 when there was
 * none (preloaded, or gone), 1 done, -1 failed (said why). */
static int unload_client(int pid)
{
	struct inject_times it;
	struct held_term old;
	char err[1024];
	int rc;

	hold_termination(&old);
	rc = hp_inject_detach(pid, &it, err, sizeof(err));
	release_termination(&old);

	if (rc == -ESRCH)
		return 0;	/* it exited meanwhile: nothing is left to take out */
	if (rc < 0) {
		fprintf(stderr, "%s: detach %d: %s\n", prog, pid, err);
		return -1;
	}
	if (rc == 0 && verbose)
		note("took the client's hooks out of pid %d (stopped for %llu us)", pid,
		     (unsigned long long)it.stopped_us);
	if (rc == 0 && verbose > 1)
		note("stopped: %llu us stopping the threads, %llu us finding a safe point, "
		     "%llu us in heapprofd_client_detach",
		     (unsigned long long)it.stop_us, (unsigned long long)it.safe_us,
		     (unsigned long long)it.call_us);
	return rc == 0;
}
/* ------------------------------------------------------------------ */
/* attach / dump / detach / sessions                                  */
/* ------------------------------------------------------------------ */

int do_attach(int pid, unsigned secs, const char *out, unsigned long long interval, int want)
{
	char req[4096], rep[MSG_MAX], prefix[PATH_MAX], msg[800];
	struct daemon d;
	uint64_t t0;
	sigset_t ss;
	int sfd, stop = 0, rc, injected;

	if (!out) {
		snprintf(prefix, sizeof(prefix), "out/attach.%d", pid);
		out = prefix;
	}
	{
		char a[PATH_MAX];

		abs_prefix(out, a, sizeof(a));
		snprintf(prefix, sizeof(prefix), "%s", a);
	}
	mkdirs_for(prefix);
	check_output(prefix);
	sigemptyset(&ss);
	sigaddset(&ss, SIGINT);
	sigaddset(&ss, SIGTERM);
	sigprocmask(SIG_BLOCK, &ss, NULL);
	sfd = signalfd(-1, &ss, SFD_CLOEXEC);
	on_event = record_event;
	reach_daemon(&d, 1, want);
	injected = load_client(&d, pid, interval ? interval : 4096, want);
	snprintf(req, sizeof(req), "attach");
	hpc_putu(req, sizeof(req), "pid", pid);
	hpc_putu(req, sizeof(req), "interval", interval ? interval : 4096);
	hpc_put(req, sizeof(req), "prefix", prefix);
	if ((rc = request_to(&d, req, rep, sizeof(rep), CTL_DUMP_TIMEOUT_MS)) != 0) {
		no_answer(&d, rc, rep, msg, sizeof(msg));
		if (injected)
			unload_client(pid);
		finish_daemon(&d);
		die("attach %d: %s", pid, msg);
	}
	hpc_get(rep, "transport", msg, sizeof(msg));
	note("attached to pid %d (%s transport); %s", pid, msg,
	     secs ? "detaching after the given time" : "Ctrl-C detaches");
	t0 = now_ms();
	while (!stop) {
		struct pollfd pf[2] = { { d.fd, POLLIN, 0 }, { sfd, POLLIN, 0 } };

		if (secs && now_ms() - t0 >= secs * 1000ULL)
			break;
		if (poll(pf, 2, 200) < 0 && errno != EINTR)
			break;
		if (pf[0].revents & POLLIN) {
			if (recv_msg(d.fd, rep, sizeof(rep)) < 0)
				break;
			record_event(rep);
			if (nresults && nlive <= 0 && results[0].done)
				stop = 2;	/* the process exited */
		}
		if (pf[1].revents & POLLIN) {
			struct signalfd_siginfo si;

			/* Taken, so that it does not also end the detach below. */
			if (read(sfd, &si, sizeof(si)) < 0)
				si.ssi_signo = 0;
			stop = 1;
		}
	}
	if (stop != 2) {
		snprintf(req, sizeof(req), "detach");
		hpc_putu(req, sizeof(req), "pid", pid);
		if ((rc = request_to(&d, req, rep, sizeof(rep), CTL_DUMP_TIMEOUT_MS)) != 0)
			note("detach: %s", no_answer(&d, rc, rep, msg, sizeof(msg)));
		/* The done event follows the reply or came before it. */
		while (!(nresults && results[0].done)) {
			struct pollfd pf = { d.fd, POLLIN, 0 };

			if (poll(&pf, 1, 5000) != 1 || recv_msg(d.fd, rep, sizeof(rep)) < 0)
				break;
			record_event(rep);
		}
	}
	if (injected && stop != 2 && unload_client(pid) < 0)
		rc = 1;
	else
		rc = 0;
	finish_daemon(&d);
	return show_results(20) ? 1 : rc;
}

int simple_request(const char *verb, int pid)
{
	char req[256], rep[MSG_MAX], v[PATH_MAX];
	struct daemon d;
	int rc;

	/* The daemon that profiled it is gone (a private one, with its
	 * heapprofctl): a client loaded by attach still has its hooks in. */
	if (!strcmp(verb, "detach") && kill(pid, 0) != 0 && errno == ESRCH)
		die("detach %d: no such process", pid);
	if (!strcmp(verb, "detach") && !daemon_there()) {
		rc = unload_client(pid);
		if (rc > 0) {
			printf("detach %d: no daemon, no profile; the client's hooks are out\n", pid);
			return 0;
		}
		if (rc < 0)
			return 1;
		die("detach %d: not attached (no heapprofd runs, and no client "
		    "loaded by attach is active in it)", pid);
	}
	reach_daemon(&d, 0, 0);
	snprintf(req, sizeof(req), "%s", verb);
	hpc_putu(req, sizeof(req), "pid", pid);
	if ((rc = request_to(&d, req, rep, sizeof(rep), CTL_DUMP_TIMEOUT_MS)) != 0) {
		no_answer(&d, rc, rep, v, sizeof(v));
		/* A client loaded by attach whose daemon session is over
		 * still has its hooks in: detach takes them out. */
		if (!strcmp(verb, "detach") && kill(pid, 0) == 0 && unload_client(pid) > 0) {
			printf("detach %d: no profile (%s); the client's hooks are out\n", pid, v);
			close(d.fd);
			return 0;
		}
		die("%s %d: %s", verb, pid, v);
	}
	if (!strcmp(verb, "detach") && unload_client(pid) < 0) {
		close(d.fd);
		return 1;
	}
	{
		char files[64], left[64], why[300];
		int has = !hpc_get(rep, "files", files, sizeof(files));

		hpc_get(rep, "prefix", v, sizeof(v));
		hpc_get(rep, "left_out", left, sizeof(left));
		hpc_get(rep, "left_why", why, sizeof(why));
		printf("%s %d: wrote", verb, pid);
		print_written(v, has, files, left, why);
	}
	close(d.fd);
	return 0;
}

/* "41.2M": a size in a column. */
static const char *size_col(unsigned long long n, char *buf, size_t len)
{
	if (n >= 1ULL << 30)
		snprintf(buf, len, "%.1fG", (double)n / (1 << 30));
	else if (n >= 1ULL << 20)
		snprintf(buf, len, "%.1fM", (double)n / (1 << 20));
	else if (n >= 1ULL << 10)
		snprintf(buf, len, "%.1fK", (double)n / (1 << 10));
	else
		snprintf(buf, len, "%llu", n);
	return buf;
}

/* The daemon's memory budget (the "ok" line's mem_* figures), in MiB. */
static void print_memory(const char *first)
{
	double mib = 1 << 20;
	unsigned long long budget = hpc_getu(first, "mem_budget", 0);
	unsigned long long ended = hpc_getu(first, "mem_ended", 0);
	unsigned long long sheds = hpc_getu(first, "mem_sheds", 0);

	if (!budget)
		return;
	printf("memory: %.1f MiB of %.1f MiB (--max-memory), %.1f MiB at most so far; the sessions hold %.1f MiB",
	       hpc_getu(first, "mem_used", 0) / mib, budget / mib,
	       hpc_getu(first, "mem_peak", 0) / mib, hpc_getu(first, "mem_held", 0) / mib);
	if (sheds || ended)
		printf("; caches dropped %llu time%s, %llu session%s ended over the budget", sheds,
		       sheds == 1 ? "" : "s", ended, ended == 1 ? "" : "s");
	printf("\n");
}

int do_sessions(void)
{
	char rep[MSG_MAX], *line, *first, *save = NULL, why[800];
	struct daemon d;
	int rc;

	reach_daemon(&d, 0, 0);
	if ((rc = request(&d, "sessions", rep, sizeof(rep))) != 0)
		die("sessions: %s", no_answer(&d, rc, rep, why, sizeof(why)));
	printf("%-7s %-16s %-8s %-9s %-9s %10s %12s %8s %7s  %s\n", "PID", "COMM", "SESSION",
	       "TRANSPORT", "STATE", "RECORDS", "BYTES", "DROPPED", "MEMORY", "OUTPUT");
	first = strtok_r(rep, "\n", &save);	/* "ok", the budgets' counts */
	while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
		char comm[32], tr[16], state[16], pfx[PATH_MAX], mem[32] = "-", v[32];
		unsigned long long id, rec, bytes, drop;
		int pid, end = 0;

		if (sscanf(line, "%d %31s %llu %15s %15s %llu %llu %llu %4095s%n", &pid, comm, &id, tr,
			   state, &rec, &bytes, &drop, pfx, &end) != 9)
			continue;
		/* key=value fields after the prefix: the daemon's memory for
		 * it, why an ended one ended. */
		if (!hpc_get(line + end, "mem", v, sizeof(v)) && v[0])
			size_col(strtoull(v, NULL, 10), mem, sizeof(mem));
		/* A process's name (the module's dormant sessions: as the
		 * process set it) and the prefix made from it, printable. */
		hp_printable(comm, sizeof(comm), comm, sizeof(comm), NULL);
		hp_printable(tr, sizeof(tr), tr, sizeof(tr), NULL);
		hp_printable(state, sizeof(state), state, sizeof(state), NULL);
		hp_printable(pfx, sizeof(pfx), pfx, sizeof(pfx), NULL);
		printf("%-7d %-16s %-8llu %-9s %-9s %10llu %12llu %8llu %7s  %s\n", pid, comm, id, tr,
		       state, rec, bytes, drop, mem, pfx);
		if (!hpc_get(line + end, "exp_sent", v, sizeof(v)) && v[0])
			printf("        exports: %s dumps sent, %llu not sent\n", v,
			       hpc_getu(line + end, "exp_unsent", 0));
		if (!hpc_get(line + end, "reason", why, sizeof(why)) && why[0]) {
			hp_printable(why, sizeof(why), why, sizeof(why), NULL);
			printf("        why it ended: %s\n", why);
		}
	}
	if (first && (hpc_getu(first, "budget_removed", 0) || hpc_getu(first, "refused_space", 0) ||
		      hpc_getu(first, "refused_user", 0) || hpc_getu(first, "left_out", 0)))
		printf("output: %llu profiles removed over a user's budget; dumps refused: %llu for the free space kept, %llu over a user's budget; %llu written without some formats\n",
		       hpc_getu(first, "budget_removed", 0), hpc_getu(first, "refused_space", 0),
		       hpc_getu(first, "refused_user", 0), hpc_getu(first, "left_out", 0));
	if (first)
		print_memory(first);
	if (first && (hpc_getu(first, "exp_queued", 0) || hpc_getu(first, "exp_dropped", 0)))
		printf("exports: %llu dumps sent, %llu not sent (%llu failed after retries or refused, %llu dropped: queue full), %llu retries, %llu profiles rejected by the server\n",
		       hpc_getu(first, "exp_sent", 0),
		       hpc_getu(first, "exp_failed", 0) + hpc_getu(first, "exp_dropped", 0),
		       hpc_getu(first, "exp_failed", 0), hpc_getu(first, "exp_dropped", 0),
		       hpc_getu(first, "exp_retries", 0), hpc_getu(first, "exp_rejected", 0));
	if (first && hpc_getu(first, "cpu_max", 0))
		printf("cpu: %llu%% of a CPU over the last second, at most %llu%% (--max-cpu); the drains waited %.1f s in all\n",
		       hpc_getu(first, "cpu_used", 0), hpc_getu(first, "cpu_max", 0),
		       hpc_getu(first, "cpu_held_ms", 0) / 1000.0);
	close(d.fd);
	return 0;
}
