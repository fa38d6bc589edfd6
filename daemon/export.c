// SPDX-License-Identifier: GPL-2.0
/*
 * Exports: every dump of a session (continuous, at the peak, at exit, on
 * detach, an OOM kill's) also sent over HTTP, to an OpenTelemetry
 * Collector (OTLP/HTTP, POST /v1development/profiles, the otlp format of
 * formats.h) or to Pyroscope (POST /ingest, the pprof format).
 *
 * Sending never holds up draining: the dumping thread encodes the profile
 * and queues it (bounded in requests and bytes; past the bound the new one
 * is dropped and counted); one sender thread posts the queue in order,
 * retrying a failed request with exponential backoff a bounded number of
 * times. What could not be sent is counted, per session and in all (the
 * control protocol's `sessions`) and logged: never silent. The files of a
 * dump are written before it is queued, whatever happens to the request.
 *
 * What a server answers is hostile: the body is read up to a bound and only
 * as an OTLP ExportProfilesServiceResponse (its partial success) or as text
 * for the log, made printable; no redirect is followed; only http and https.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "curl_load.h"
#include "hpd.h"
#include "pipeline/formats.h"
#include "pipeline/profile.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

#define Q_MAX_BYTES	(64ULL << 20)	/* the bodies waiting, all together */
#define BACKOFF_MS	500		/* then 1, 2, 4 s... between tries */
#define REPLY_MAX	(64 << 10)	/* a reply body read past this fails the request */

struct hpd_export_opts hpd_export_opts = {
	.timeout_ms = 10000, .exit_wait_ms = 5000, .retries = 5, .queue_max = 64,
};
static struct hpd_export_targets dflt;	/* heapprofd --export */

struct hpd_export_acct {
	int refs;			/* atomic */
	struct hpd_export_counts c;	/* atomics */
};

struct item {
	struct item *next;
	int kind;
	char url[HPD_EXPORT_URL_MAX + 512];	/* the whole URL, query included */
	char base[HPD_EXPORT_URL_MAX];	/* Pyroscope: the server; the sender makes url */
	char name[512];			/* Pyroscope: the series, escaped by the sender */
	int64_t from, until;		/* Pyroscope: the profile's span, in s */
	uint8_t *body;
	size_t len;
	int tries;
	uint64_t next_ms;		/* not before (backoff) */
	pid_t pid;
	struct hpd_export_acct *acct;
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t thread;
	int started, stopping;
	uint64_t stop_by_ms;		/* give up on the queue at this time */
	struct item *head, *tail;
	size_t n;
	uint64_t bytes;
	struct hpd_export_counts total;	/* atomics */
} q = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

static void bump(uint64_t *a, uint64_t *b, uint64_t n)
{
	__atomic_add_fetch(a, n, __ATOMIC_RELAXED);
	if (b)
		__atomic_add_fetch(b, n, __ATOMIC_RELAXED);
}

#define COUNT(acct, field, n) bump(&q.total.field, (acct) ? &(acct)->c.field : NULL, (n))

static const char *kind_name(int kind)
{
	return kind == HPD_EXPORT_OTLP ? "otlp" : "pyroscope";
}

int hpd_export_parse(const char *list, struct hpd_export_targets *t, char *why, size_t wl)
{
	const char *p = list;

	while (*p) {
		size_t n = strcspn(p, " \t\n");
		char one[HPD_EXPORT_URL_MAX + 32], *eq, *url;
		int kind;

		if (!n) {
			p++;
			continue;
		}
		if (n >= sizeof(one)) {
			snprintf(why, wl, "--export: a URL longer than %d bytes", HPD_EXPORT_URL_MAX);
			return -1;
		}
		memcpy(one, p, n);
		one[n] = 0;
		p += n;
		eq = strchr(one, '=');
		if (!eq) {
			snprintf(why, wl, "--export '%s': say what to send and where: otlp=URL or pyroscope=URL",
				 one);
			return -1;
		}
		*eq = 0;
		url = eq + 1;
		if (!strcmp(one, "otlp"))
			kind = HPD_EXPORT_OTLP;
		else if (!strcmp(one, "pyroscope"))
			kind = HPD_EXPORT_PYROSCOPE;
		else {
			snprintf(why, wl, "--export: '%s' is neither otlp nor pyroscope", one);
			return -1;
		}
		if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8)) {
			snprintf(why, wl, "--export %s=%s: the URL must start with http:// or https://",
				 one, url);
			return -1;
		}
		for (const char *c = url; *c; c++)
			if ((unsigned char)*c <= 0x20 || *c == 0x7f) {
				snprintf(why, wl, "--export: the URL has a space or a control character");
				return -1;
			}
		if (t->n == HPD_EXPORT_MAX) {
			snprintf(why, wl, "--export: at most %d destinations", HPD_EXPORT_MAX);
			return -1;
		}
		/* No trailing '/': the paths are appended. */
		while (strlen(url) > 8 && url[strlen(url) - 1] == '/')
			url[strlen(url) - 1] = 0;
		if (strlen(url) >= sizeof(t->t[0].url)) {
			snprintf(why, wl, "--export: a URL longer than %d bytes", HPD_EXPORT_URL_MAX - 1);
			return -1;
		}
		t->t[t->n].kind = kind;
		memcpy(t->t[t->n].url, url, strlen(url) + 1);
		t->n++;
	}
	return 0;
}

int hpd_export_option(const char *arg, char *why, size_t wl)
{
	return hpd_export_parse(arg, &dflt, why, wl);
}

const struct hpd_export_targets *hpd_export_default(void)
{
	return &dflt;
}

/* ---- per session ---- */

struct hpd_export_acct *hpd_export_acct_new(void)
{
	struct hpd_export_acct *a = calloc(1, sizeof(*a));

	if (a)
		a->refs = 1;
	return a;
}

void hpd_export_acct_put(struct hpd_export_acct *a)
{
	if (a && !__atomic_sub_fetch(&a->refs, 1, __ATOMIC_ACQ_REL))
		free(a);
}

static void get_counts(struct hpd_export_counts *out, const struct hpd_export_counts *c)
{
	out->queued = __atomic_load_n(&c->queued, __ATOMIC_RELAXED);
	out->sent = __atomic_load_n(&c->sent, __ATOMIC_RELAXED);
	out->failed = __atomic_load_n(&c->failed, __ATOMIC_RELAXED);
	out->dropped = __atomic_load_n(&c->dropped, __ATOMIC_RELAXED);
	out->retries = __atomic_load_n(&c->retries, __ATOMIC_RELAXED);
	out->rejected = __atomic_load_n(&c->rejected, __ATOMIC_RELAXED);
	out->bytes = __atomic_load_n(&c->bytes, __ATOMIC_RELAXED);
}

void hpd_export_acct_get(const struct hpd_export_acct *a, struct hpd_export_counts *out)
{
	memset(out, 0, sizeof(*out));
	if (a)
		get_counts(out, &a->c);
}

void hpd_export_totals(struct hpd_export_counts *out)
{
	get_counts(out, &q.total);
}

/* ---- the queue ---- */

static void item_free(struct item *it)
{
	hpd_export_acct_put(it->acct);
	free(it->body);
	free(it);
}

/* Queue it, or drop it (counted) when the queue is full. */
static void enqueue(struct item *it)
{
	const char *full;

	pthread_mutex_lock(&q.lock);
	full = !q.started ? "the sender did not start" : q.stopping ? "the daemon is stopping" :
	       q.n >= hpd_export_opts.queue_max || q.bytes + it->len > Q_MAX_BYTES ?
	       "the queue is full (the server is slow or down)" : NULL;
	if (!full) {
		/* Counted before the sender can see it: it may be freed at once. */
		COUNT(it->acct, queued, 1);
		if (q.tail)
			q.tail->next = it;
		else
			q.head = it;
		q.tail = it;
		q.n++;
		q.bytes += it->len;
		pthread_cond_signal(&q.cond);
	}
	pthread_mutex_unlock(&q.lock);
	if (full) {
		COUNT(it->acct, dropped, 1);
		hpd_log(HPD_WARN, "export: pid %d's dump not sent to %s: %s", (int)it->pid,
			kind_name(it->kind), full);
		item_free(it);
	}
}

/* "a-z A-Z 0-9 _ . -" kept, anything else '_': a name Pyroscope takes. */
static void app_name(char *out, size_t len, const char *comm)
{
	size_t i;

	for (i = 0; comm && comm[i] && i + 1 < len; i++)
		out[i] = isalnum((unsigned char)comm[i]) || strchr("_.-", comm[i]) ? comm[i] : '_';
	out[i] = 0;
	if (!i)
		snprintf(out, len, "unknown");
}

/* Pyroscope's series for this dump: app{pid=..,hostname=..,dump=..} and its span. */
static void pyroscope_series(struct item *it, const struct hp_prof *p,
			     const struct hp_format_args *a)
{
	char app[64], host[128] = "";
	const char *kind = a->who && a->who->kind && *a->who->kind ? a->who->kind : "now";

	app_name(app, sizeof(app), a->who ? a->who->comm : NULL);
	if (gethostname(host, sizeof(host) - 1) < 0)
		host[0] = 0;
	for (char *c = host; *c; c++)
		if (!isalnum((unsigned char)*c) && !strchr("_.-", *c))
			*c = '_';
	snprintf(it->name, sizeof(it->name), "%s{pid=\"%d\",hostname=\"%s\",dump=\"%s\"}", app,
		 a->who ? (int)a->who->pid : 0, host, kind);
	it->from = p->time_ns / 1000000000;
	it->until = (p->time_ns + p->duration_ns) / 1000000000;
	if (it->until <= it->from)
		it->until = it->from + 1;
}

void hpd_export_sink(void *arg, const struct hp_prof *prof, const struct hp_format_args *a,
		     int files_rc)
{
	struct hpd_export_sess *es = arg;
	char why[300];

	(void)files_rc;
	for (int i = 0; i < es->targets.n; i++) {
		const struct hp_format *f = es->targets.t[i].kind == HPD_EXPORT_OTLP ?
					    &hp_format_otlp : &hp_format_pprof;
		struct item *it = calloc(1, sizeof(*it));

		if (!it) {
			COUNT(es->acct, dropped, 1);
			continue;
		}
		it->kind = es->targets.t[i].kind;
		it->pid = a->who ? a->who->pid : 0;
		if (es->acct)
			__atomic_add_fetch(&es->acct->refs, 1, __ATOMIC_ACQ_REL);
		it->acct = es->acct;
		if (hp_format_encode(f, prof, a, &it->body, &it->len, why, sizeof(why))) {
			COUNT(it->acct, dropped, 1);
			hpd_log(HPD_WARN, "export: pid %d's dump not sent to %s: %s", (int)it->pid,
				kind_name(it->kind), why);
			item_free(it);
			continue;
		}
		if (it->kind == HPD_EXPORT_OTLP) {
			snprintf(it->url, sizeof(it->url), "%s/v1development/profiles",
				 es->targets.t[i].url);
		} else {
			/* (the sender, which has libcurl, makes the URL) */
			snprintf(it->base, sizeof(it->base), "%s", es->targets.t[i].url);
			pyroscope_series(it, prof, a);
		}
		enqueue(it);
	}
}

/* ---- the sender ---- */

struct reply {
	char head[512];		/* the start of the body, for the log */
	uint8_t *body;
	size_t len;
	int too_big;
};

static size_t on_body(char *data, size_t sz, size_t n, void *arg)
{
	struct reply *r = arg;
	size_t len = sz * n;
	uint8_t *nb;

	if (r->len + len > REPLY_MAX) {
		r->too_big = 1;
		return 0;	/* fails the transfer */
	}
	nb = realloc(r->body, r->len + len + 1);
	if (!nb)
		return 0;
	memcpy(nb + r->len, data, len);
	r->body = nb;
	r->len += len;
	return len;
}

/* The reply's first bytes as one printable line. */
static void printable(char *out, size_t cap, const uint8_t *b, size_t len)
{
	size_t o = 0;

	for (size_t i = 0; i < len && o + 1 < cap && i < 200; i++)
		out[o++] = b[i] >= 0x20 && b[i] < 0x7f ? (char)b[i] : '.';
	out[o] = 0;
}

/*
 * OTLP's answer to a 200: the profiles it rejected (partial success).
 * Returns how many, and why in why.
 */
static int64_t otlp_rejected(const struct reply *r, char *why, size_t wl)
{
	Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceResponse *m;
	int64_t n = 0;

	if (!r->len)
		return 0;
	m = opentelemetry__proto__collector__profiles__v1development__export_profiles_service_response__unpack(
		NULL, r->len, r->body);
	if (!m)
		return 0;	/* not one: nothing said against it */
	if (m->partial_success && m->partial_success->rejected_profiles > 0) {
		n = m->partial_success->rejected_profiles;
		printable(why, wl, (const uint8_t *)(m->partial_success->error_message ?
						     m->partial_success->error_message : ""),
			  m->partial_success->error_message ?
			  strlen(m->partial_success->error_message) : 0);
	}
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_response__free_unpacked(
		m, NULL);
	return n;
}

enum { SENT, RETRY, GIVE_UP };

static struct hpd_curl cu;	/* the sender's libcurl (curl_load.c) */

/* Pyroscope's URL: /ingest on the server, the series escaped. */
static int pyroscope_url(struct item *it, char *why, size_t wl)
{
	char *enc = cu.easy_escape(NULL, it->name, 0);
	int n;

	if (!enc) {
		snprintf(why, wl, "out of memory");
		return -1;
	}
	n = snprintf(it->url, sizeof(it->url),
		     "%s/ingest?name=%s&from=%lld&until=%lld&format=pprof&spyName=heapprofd",
		     it->base, enc, (long long)it->from, (long long)it->until);
	cu.free(enc);
	if (n < 0 || (size_t)n >= sizeof(it->url)) {
		snprintf(why, wl, "the URL would be too long");
		return -1;
	}
	it->name[0] = 0;	/* made: a retry keeps this URL */
	return 0;
}

static int post(CURL *c, struct item *it, char *why, size_t wl)
{
	struct curl_slist *hdr = NULL;
	curl_mime *mime = NULL;
	struct reply r = { 0 };
	long status = 0;
	CURLcode rc;
	int res;

	if (it->kind != HPD_EXPORT_OTLP && it->name[0] && pyroscope_url(it, why, wl))
		return GIVE_UP;
	cu.easy_reset(c);
	cu.easy_setopt(c, CURLOPT_URL, it->url);
	cu.easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	cu.easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	cu.easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	cu.easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)hpd_export_opts.timeout_ms);
	cu.easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)hpd_export_opts.timeout_ms);
	cu.easy_setopt(c, CURLOPT_USERAGENT, "heapprofd");
	cu.easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	cu.easy_setopt(c, CURLOPT_WRITEDATA, &r);
	if (it->kind == HPD_EXPORT_OTLP) {
		hdr = cu.slist_append(hdr, "Content-Type: application/x-protobuf");
		cu.easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
		cu.easy_setopt(c, CURLOPT_POSTFIELDS, (const char *)it->body);
		cu.easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)it->len);
	} else {
		curl_mimepart *part;

		mime = cu.mime_init(c);
		part = cu.mime_addpart(mime);
		cu.mime_name(part, "profile");
		cu.mime_filename(part, "profile.pprof");
		cu.mime_data(part, (const char *)it->body, it->len);
		cu.easy_setopt(c, CURLOPT_MIMEPOST, mime);
	}
	rc = cu.easy_perform(c);
	if (rc == CURLE_OK)
		cu.easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	if (rc != CURLE_OK) {
		snprintf(why, wl, "%s", r.too_big ? "the reply was too long" : cu.easy_strerror(rc));
		res = r.too_big ? GIVE_UP : RETRY;
	} else if (status >= 200 && status < 300) {
		char rej[256] = "";
		int64_t n = it->kind == HPD_EXPORT_OTLP ? otlp_rejected(&r, rej, sizeof(rej)) : 0;

		if (n > 0) {
			COUNT(it->acct, rejected, (uint64_t)n);
			snprintf(why, wl, "the server rejected %lld profiles: %s", (long long)n, rej);
		}
		res = SENT;
	} else {
		char head[256];

		printable(head, sizeof(head), r.body, r.len);
		snprintf(why, wl, "HTTP %ld%s%s", status, head[0] ? ": " : "", head);
		/* Worth another try: the server is busy or briefly broken. */
		res = status == 408 || status == 429 || status >= 500 ? RETRY : GIVE_UP;
	}
	free(r.body);
	cu.slist_free_all(hdr);
	cu.mime_free(mime);
	return res;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Wait on the queue's condition until ms (monotonic) at the latest. */
static void wait_until(uint64_t ms)
{
	struct timespec ts;
	uint64_t now = mono_ms();

	if (ms <= now)
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += (time_t)((ms - now) / 1000);
	ts.tv_nsec += (long)((ms - now) % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_cond_timedwait(&q.cond, &q.lock, &ts);
}

/*
 * libcurl loaded and started, here rather than in hpd_export_start: the
 * event loop never waits for it (seconds where loading is slow). NULL, with
 * why in start_why, when it cannot be: every request then fails, saying so.
 */
static char start_why[300];

static CURL *sender_start(void)
{
	CURL *c;

	if (hpd_curl_load(&cu, start_why, sizeof(start_why)))
		return NULL;
	if (cu.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		snprintf(start_why, sizeof(start_why), "libcurl could not start");
		return NULL;
	}
	c = cu.easy_init();
	if (!c) {
		snprintf(start_why, sizeof(start_why), "libcurl could not start");
		cu.global_cleanup();
	}
	return c;
}

static void *sender(void *arg)
{
	CURL *c = sender_start();

	(void)arg;
	if (!c)
		hpd_log(HPD_ERR, "export: %s: no dump will be sent", start_why);
	pthread_mutex_lock(&q.lock);
	for (;;) {
		struct item *it = q.head;
		char why[400] = "";
		int res;

		if (!it && q.stopping)
			break;
		if (q.stopping && mono_ms() >= q.stop_by_ms)
			break;
		if (!it || it->next_ms > mono_ms()) {
			wait_until(!it ? (q.stopping ? q.stop_by_ms : mono_ms() + 1000) :
				   q.stopping && q.stop_by_ms < it->next_ms ? q.stop_by_ms :
				   it->next_ms);
			continue;
		}
		pthread_mutex_unlock(&q.lock);
		res = c ? post(c, it, why, sizeof(why)) : GIVE_UP;
		if (!c)
			snprintf(why, sizeof(why), "%s", start_why);
		it->tries++;
		if (res == RETRY && it->tries <= (int)hpd_export_opts.retries) {
			it->next_ms = mono_ms() + ((uint64_t)BACKOFF_MS << (it->tries - 1));
			COUNT(it->acct, retries, 1);
			hpd_log(HPD_DEBUG, "export: %s: %s; trying again in %llu ms", kind_name(it->kind),
				why, (unsigned long long)((uint64_t)BACKOFF_MS << (it->tries - 1)));
			pthread_mutex_lock(&q.lock);
			continue;
		}
		if (res == SENT) {
			COUNT(it->acct, sent, 1);
			COUNT(it->acct, bytes, it->len);
			if (why[0])
				hpd_log(HPD_WARN, "export: %s: %s", kind_name(it->kind), why);
		} else {
			COUNT(it->acct, failed, 1);
			hpd_log(HPD_WARN, "export: pid %d's dump not sent to %s after %d tries: %s",
				(int)it->pid, kind_name(it->kind), it->tries, why);
		}
		pthread_mutex_lock(&q.lock);
		q.head = it->next;
		if (!q.head)
			q.tail = NULL;
		q.n--;
		q.bytes -= it->len;
		item_free(it);
	}
	/* Stopping, out of time: what is left is counted as not sent. */
	while (q.head) {
		struct item *it = q.head;

		q.head = it->next;
		q.n--;
		q.bytes -= it->len;
		COUNT(it->acct, failed, 1);
		hpd_log(HPD_WARN, "export: pid %d's dump not sent to %s: the daemon stopped first",
			(int)it->pid, kind_name(it->kind));
		item_free(it);
	}
	q.tail = NULL;
	pthread_mutex_unlock(&q.lock);
	if (c) {
		cu.easy_cleanup(c);
		cu.global_cleanup();
	}
	return NULL;
}

int hpd_export_start(void)
{
	pthread_condattr_t ca;
	int rc;

	if (q.started)
		return 0;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_destroy(&q.cond);
	pthread_cond_init(&q.cond, &ca);
	pthread_condattr_destroy(&ca);
	rc = pthread_create(&q.thread, NULL, sender, NULL);
	if (rc) {
		hpd_log(HPD_ERR, "export: cannot start the sender: %s", strerror(rc));
		return -rc;
	}
	q.started = 1;
	return 0;
}

void hpd_export_stop(void)
{
	struct hpd_export_counts t;

	if (!q.started)
		return;
	pthread_mutex_lock(&q.lock);
	q.stopping = 1;
	q.stop_by_ms = mono_ms() + hpd_export_opts.exit_wait_ms;
	pthread_cond_signal(&q.cond);
	pthread_mutex_unlock(&q.lock);
	pthread_join(q.thread, NULL);
	q.started = 0;
	hpd_export_totals(&t);
	if (t.queued || t.dropped)
		hpd_log(t.failed || t.dropped ? HPD_WARN : HPD_INFO,
			"export: %llu dumps sent, %llu not sent (%llu failed, %llu dropped), %llu retries",
			(unsigned long long)t.sent, (unsigned long long)(t.failed + t.dropped),
			(unsigned long long)t.failed, (unsigned long long)t.dropped,
			(unsigned long long)t.retries);
}
