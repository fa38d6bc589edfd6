// SPDX-License-Identifier: GPL-2.0
/* libcurl loaded at run time, the first time an export is sent (curl_load.h). */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "curl_load.h"

static const char *const sonames[] = { "libcurl.so.4", "libcurl-gnutls.so.4" };

/* Each pointer of struct hpd_curl and the symbol it is, in order. */
static const struct {
	size_t off;
	const char *sym;
} syms[] = {
#define S(field, name) { offsetof(struct hpd_curl, field), name }
	S(global_init, "curl_global_init"),
	S(global_cleanup, "curl_global_cleanup"),
	S(easy_init, "curl_easy_init"),
	S(easy_cleanup, "curl_easy_cleanup"),
	S(easy_reset, "curl_easy_reset"),
	S(easy_setopt, "curl_easy_setopt"),
	S(easy_perform, "curl_easy_perform"),
	S(easy_getinfo, "curl_easy_getinfo"),
	S(easy_strerror, "curl_easy_strerror"),
	S(easy_escape, "curl_easy_escape"),
	S(free, "curl_free"),
	S(slist_append, "curl_slist_append"),
	S(slist_free_all, "curl_slist_free_all"),
	S(mime_init, "curl_mime_init"),
	S(mime_free, "curl_mime_free"),
	S(mime_addpart, "curl_mime_addpart"),
	S(mime_name, "curl_mime_name"),
	S(mime_filename, "curl_mime_filename"),
	S(mime_data, "curl_mime_data"),
#undef S
};

static struct hpd_curl loaded;
static int state;	/* 0 not tried, 1 loaded, -1 failed */
static char failed_why[256];

int hpd_curl_load(struct hpd_curl *out, char *why, size_t wl)
{
	void *h = NULL;

	if (state == 0) {
		char err[200] = "";

		for (size_t i = 0; i < sizeof(sonames) / sizeof(sonames[0]) && !h; i++) {
			/* RTLD_LOCAL: its symbols stay out of everyone else's way. */
			h = dlopen(sonames[i], RTLD_NOW | RTLD_LOCAL);
			if (!h && !err[0])	/* the first name's is the one that counts */
				snprintf(err, sizeof(err), "%s", dlerror());
		}
		state = -1;
		if (!h) {
			snprintf(failed_why, sizeof(failed_why), "libcurl could not be loaded: %s", err);
		} else {
			size_t i;

			for (i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
				void *f = dlsym(h, syms[i].sym);

				if (!f) {
					snprintf(failed_why, sizeof(failed_why),
						 "libcurl has no %s", syms[i].sym);
					break;
				}
				memcpy((char *)&loaded + syms[i].off, &f, sizeof(f));
			}
			if (i == sizeof(syms) / sizeof(syms[0]))
				state = 1;
			/* (a failed one stays loaded: dlclose of TLS libraries is unsafe) */
		}
	}
	if (state < 0) {
		snprintf(why, wl, "%s", failed_why);
		return -1;
	}
	*out = loaded;
	return 0;
}
