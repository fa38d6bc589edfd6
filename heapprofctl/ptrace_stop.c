// SPDX-License-Identifier: GPL-2.0
/*
 * Stopping every thread of a running process without disturbing it:
 * PTRACE_SEIZE (no SIGSTOP is sent), then PTRACE_INTERRUPT, which stops a
 * thread where it is (in a system call, the call is interrupted and
 * restarts when the thread resumes with its registers as they were). The
 * thread list is read again once all are stopped, until no thread was
 * created meanwhile.
 *
 * A signal that arrives while we hold a thread shows as a
 * signal-delivery-stop: it is noted and suppressed, and sent to the same
 * thread again (tgkill) once we have detached, so that no signal is lost
 * and none runs its handler in the middle of a remote call.
 *
 * Every thread is seized with PTRACE_O_TRACEEXEC: an exec by any of them,
 * seen at any wait, marks the set changed, and from then on nothing is
 * written into the process (remote_call.c). Who the process is, its
 * program and its credentials, is read before and after each step too.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "arch.h"
#include "inject.h"

static struct sthread *find(struct stopset *s, pid_t tid)
{
	for (int i = 0; i < s->n; i++)
		if (s->t[i].tid == tid)
			return &s->t[i];
	return NULL;
}

void stopset_note_signal(struct sthread *t, int sig)
{
	siginfo_t si;

	for (int i = 0; i < t->nsigs; i++)
		if (t->sigs[i].si_signo == sig && sig < SIGRTMIN)
			return;	/* a standard signal is pending once */
	if (ptrace(PTRACE_GETSIGINFO, t->tid, NULL, &si)) {
		memset(&si, 0, sizeof(si));
		si.si_signo = sig;
		si.si_code = SI_TKILL;
	}
	if (t->nsigs < (int)(sizeof(t->sigs) / sizeof(t->sigs[0])))
		t->sigs[t->nsigs++] = si;
}

/* Send a held-back signal again, with its siginfo where the kernel lets
 * us (a sigqueue'd one keeps its value), else as a plain tgkill. */
static void give_back(pid_t pid, pid_t tid, siginfo_t *si)
{
	if (si->si_code < 0 && si->si_code != SI_TKILL &&
	    !syscall(SYS_rt_tgsigqueueinfo, pid, tid, si->si_signo, si))
		return;
	syscall(SYS_tgkill, pid, tid, si->si_signo);
}

static void drop(struct stopset *s, struct sthread *t)
{
	*t = s->t[--s->n];
}

/*
 * Wait until thread t is in the stop our PTRACE_INTERRUPT asked for.
 * Returns 0 stopped, 1 the thread is gone, -errno.
 */
static int wait_stop(struct stopset *s, struct sthread *t)
{
	int st;

	for (;;) {
		pid_t r = waitpid(t->tid, &st, __WALL);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return errno == ECHILD ? 1 : -errno;
		}
		if (WIFEXITED(st) || WIFSIGNALED(st))
			return 1;
		if (!WIFSTOPPED(st))
			continue;
		if ((st >> 16) == PTRACE_EVENT_EXEC) {
			/* Another program now: held, never written to. */
			s->changed = 1;
			t->stopped = 1;
			return 0;
		}
		if ((st >> 16) == PTRACE_EVENT_STOP) {
			t->stopped = 1;
			if (arch_get_regs(t->tid, &t->regs))
				return errno == ESRCH ? 1 : -errno;
			return 0;
		}
		if ((st >> 16) == 0 && WSTOPSIG(st) != (SIGTRAP | 0x80)) {
			/* A signal on its way in: hold it back, ask again. */
			stopset_note_signal(t, WSTOPSIG(st));
			ptrace(PTRACE_CONT, t->tid, NULL, NULL);
			ptrace(PTRACE_INTERRUPT, t->tid, NULL, NULL);
			continue;
		}
		/* A system call stop (a thread that was making a call) or
		 * another event: on to the stop asked for. */
		ptrace(PTRACE_CONT, t->tid, NULL, NULL);
		ptrace(PTRACE_INTERRUPT, t->tid, NULL, NULL);
	}
}

static int add_thread(struct stopset *s, pid_t tid, char *err, size_t errlen)
{
	struct sthread *t;

	if (s->n == s->cap) {
		int ncap = s->cap ? s->cap * 2 : 16;
		struct sthread *nt = realloc(s->t, (size_t)ncap * sizeof(*nt));

		if (!nt) {
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
		s->t = nt;
		s->cap = ncap;
	}
	if (ptrace(PTRACE_SEIZE, tid, NULL,
		   (void *)(long)(PTRACE_O_TRACEEXEC | PTRACE_O_TRACESYSGOOD))) {
		int e = errno;

		if (e == ESRCH)
			return 0;	/* it exited meanwhile */
		snprintf(err, errlen, "cannot trace thread %d of pid %d: %s", (int)tid, (int)s->pid,
			 strerror(e));
		return -e;
	}
	t = &s->t[s->n++];
	memset(t, 0, sizeof(*t));
	t->tid = tid;
	if (ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) && errno != ESRCH) {
		snprintf(err, errlen, "PTRACE_INTERRUPT %d: %s", (int)tid, strerror(errno));
		return -errno;
	}
	return 0;
}

/* Seize the threads listed now that we do not hold yet; how many new. */
static int seize_listed(struct stopset *s, char *err, size_t errlen)
{
	char dir[64];
	struct dirent *de;
	int added = 0, rc = 0;
	DIR *d;

	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)s->pid);
	d = opendir(dir);
	if (!d) {
		snprintf(err, errlen, "no process %d", (int)s->pid);
		return -ESRCH;
	}
	while ((de = readdir(d)) != NULL && !rc) {
		pid_t tid = (pid_t)atoi(de->d_name);

		if (tid <= 0 || find(s, tid))
			continue;
		rc = add_thread(s, tid, err, errlen);
		added++;
	}
	closedir(d);
	return rc ? rc : added;
}

static int wait_all(struct stopset *s, char *err, size_t errlen)
{
	for (int i = 0; i < s->n;) {
		int rc;

		if (s->t[i].stopped) {
			i++;
			continue;
		}
		rc = wait_stop(s, &s->t[i]);
		if (rc < 0) {
			snprintf(err, errlen, "waiting for thread %d: %s", (int)s->t[i].tid, strerror(-rc));
			return rc;
		}
		if (rc == 1)
			drop(s, &s->t[i]);
		else
			i++;
	}
	return 0;
}

int stop_all(struct stopset *s, pid_t pid, char *err, size_t errlen)
{
	int rc, rounds = 0;

	memset(s, 0, sizeof(*s));
	s->pid = pid;
	do {
		rc = seize_listed(s, err, errlen);
		if (rc < 0)
			return rc;
		if (wait_all(s, err, errlen))
			return -EIO;
		if (++rounds > 1000) {
			snprintf(err, errlen, "pid %d keeps creating threads", (int)pid);
			return -EAGAIN;
		}
	} while (rc > 0);	/* new threads: look again once all are held */
	if (!s->n || target_id_read(pid, &s->id)) {
		snprintf(err, errlen, "no process %d", (int)pid);
		return -ESRCH;
	}
	return 0;
}

int run_briefly(struct stopset *s, unsigned us, char *err, size_t errlen)
{
	struct timespec ts = { 0, (long)us * 1000L };

	for (int i = 0; i < s->n; i++) {
		s->t[i].stopped = 0;
		ptrace(PTRACE_CONT, s->t[i].tid, NULL, NULL);
	}
	nanosleep(&ts, NULL);
	for (int i = 0; i < s->n; i++)
		ptrace(PTRACE_INTERRUPT, s->t[i].tid, NULL, NULL);
	if (wait_all(s, err, errlen))
		return -EIO;
	/* Threads it created meanwhile. */
	for (;;) {
		int rc = seize_listed(s, err, errlen);

		if (rc < 0)
			return rc;
		if (wait_all(s, err, errlen))
			return -EIO;
		if (!rc)
			break;
	}
	return s->n ? 0 : -ESRCH;
}

void run_others_briefly(struct stopset *s, pid_t except, unsigned us)
{
	struct timespec ts = { 0, (long)us * 1000L };
	char err[200];

	for (int i = 0; i < s->n; i++)
		if (s->t[i].tid != except) {
			s->t[i].stopped = 0;
			ptrace(PTRACE_CONT, s->t[i].tid, NULL, NULL);
		}
	nanosleep(&ts, NULL);
	for (int i = 0; i < s->n; i++)
		if (s->t[i].tid != except)
			ptrace(PTRACE_INTERRUPT, s->t[i].tid, NULL, NULL);
	for (int i = 0; i < s->n; i++)
		if (s->t[i].tid != except && !s->t[i].stopped && wait_stop(s, &s->t[i]) == 1)
			s->t[i].stopped = 1;	/* gone: nothing to wait for */
	/* Threads they created meanwhile are held too (stopped by now). */
	for (int k = 0; k < 100 && seize_listed(s, err, sizeof(err)) > 0; k++)
		for (int i = 0; i < s->n; i++)
			if (!s->t[i].stopped && s->t[i].tid != except && wait_stop(s, &s->t[i]) == 1)
				s->t[i].stopped = 1;
}

/* A thread left running (a call let go): stopped at whatever stop comes
 * next, so that it can be detached. */
static void stop_running(struct stopset *s, struct sthread *t)
{
	int st;

	if (t->stopped)
		return;
	ptrace(PTRACE_INTERRUPT, t->tid, NULL, NULL);
	while (waitpid(t->tid, &st, __WALL) < 0)
		if (errno != EINTR)
			return;
	if (WIFSTOPPED(st) && (st >> 16) == 0 && WSTOPSIG(st) != (SIGTRAP | 0x80))
		stopset_note_signal(t, WSTOPSIG(st));
	if (WIFSTOPPED(st) && (st >> 16) == PTRACE_EVENT_EXEC)
		s->changed = 1;
	t->stopped = 1;
}

void release_all(struct stopset *s)
{
	for (int i = 0; i < s->n; i++) {
		stop_running(s, &s->t[i]);
		ptrace(PTRACE_DETACH, s->t[i].tid, NULL, NULL);
	}
	for (int i = 0; i < s->n; i++)
		for (int k = 0; k < s->t[i].nsigs; k++)
			give_back(s->pid, s->t[i].tid, &s->t[i].sigs[k]);
	free(s->t);
	s->t = NULL;
	s->n = s->cap = 0;
}

/* The program (the exe's device and inode) and the credentials. */
int target_id_read(pid_t pid, struct target_id *id)
{
	char p[64], buf[4096], *l;
	struct stat st;
	ssize_t n;
	int fd;

	memset(id, 0, sizeof(*id));
	snprintf(p, sizeof(p), "/proc/%d/exe", (int)pid);
	if (stat(p, &st))
		return -errno;
	id->exe_dev = st.st_dev;
	id->exe_ino = st.st_ino;
	snprintf(p, sizeof(p), "/proc/%d/status", (int)pid);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = 0;
	for (l = strtok(buf, "\n"); l; l = strtok(NULL, "\n"))
		if (!strncmp(l, "Uid:", 4) || !strncmp(l, "Gid:", 4) || !strncmp(l, "Groups:", 7) ||
		    !strncmp(l, "CapEff:", 7) || !strncmp(l, "CapPrm:", 7))
			snprintf(id->creds + strlen(id->creds), sizeof(id->creds) - strlen(id->creds),
				 "%s\n", l);
	return 0;
}

int target_id_same(const struct target_id *a, const struct target_id *b)
{
	return a->exe_dev == b->exe_dev && a->exe_ino == b->exe_ino && !strcmp(a->creds, b->creds);
}
