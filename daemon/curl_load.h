/* SPDX-License-Identifier: GPL-2.0 */
/*
 * libcurl, loaded when the first export is sent (curl_load.c). Linked in,
 * libcurl and the ~30 libraries it needs (TLS, Kerberos, LDAP, ...) would
 * be mapped into every daemon, exports or not: a root daemon that never
 * speaks HTTP keeps them out, and starts in a third of the time where
 * loading is slow (a debug kernel under emulation: 1.9 s of 2.9 s).
 */
#ifndef HPD_CURL_LOAD_H
#define HPD_CURL_LOAD_H

#include <stddef.h>

#include <curl/curl.h>

/* The calls export.c makes, by the names libcurl gives them. */
struct hpd_curl {
	CURLcode (*global_init)(long flags);
	void (*global_cleanup)(void);
	CURL *(*easy_init)(void);
	void (*easy_cleanup)(CURL *c);
	void (*easy_reset)(CURL *c);
	CURLcode (*easy_setopt)(CURL *c, CURLoption opt, ...);
	CURLcode (*easy_perform)(CURL *c);
	CURLcode (*easy_getinfo)(CURL *c, CURLINFO info, ...);
	const char *(*easy_strerror)(CURLcode rc);
	char *(*easy_escape)(CURL *c, const char *s, int len);
	void (*free)(void *p);
	struct curl_slist *(*slist_append)(struct curl_slist *l, const char *s);
	void (*slist_free_all)(struct curl_slist *l);
	curl_mime *(*mime_init)(CURL *c);
	void (*mime_free)(curl_mime *m);
	curl_mimepart *(*mime_addpart)(curl_mime *m);
	CURLcode (*mime_name)(curl_mimepart *p, const char *name);
	CURLcode (*mime_filename)(curl_mimepart *p, const char *name);
	CURLcode (*mime_data)(curl_mimepart *p, const char *data, size_t len);
};

/*
 * Loads libcurl (libcurl.so.4, else libcurl-gnutls.so.4) once and fills
 * *out; later calls give the same. Returns 0, or -1 with why (dlerror's
 * words) in why. One thread at a time (the sender's).
 */
int hpd_curl_load(struct hpd_curl *out, char *why, size_t wl);

#endif
