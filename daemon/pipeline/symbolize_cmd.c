// SPDX-License-Identifier: GPL-2.0
/*
 * `heapprofctl symbolize FILE [-o OUT]`: fill in function names and
 * file:line for a profile written with build ids and addresses only (for
 * instance on a machine without debug info). ELF files are found by build
 * id: /usr/lib/debug/.build-id/xx/rest.debug, then the path the mapping
 * names (used only if its build id matches), then /usr/lib/debug/PATH.
 * No network (no debuginfod).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static int bid_eq(const struct hp_elf *e, const char *hex)
{
	char b[160];

	hp_elf_build_id_hex(e, b, sizeof(b));
	return hex && b[0] && !strcmp(b, hex);
}

static struct hp_elf *find_elf(const struct hp_prof_map *m)
{
	char path[PATH_MAX + 64];
	struct hp_elf *e;

	if (m->build_id && strlen(m->build_id) > 2) {
		snprintf(path, sizeof(path), "/usr/lib/debug/.build-id/%.2s/%s.debug",
			 m->build_id, m->build_id + 2);
		e = hp_elf_open(NULL, path, -1, 0, 0);
		if (e && bid_eq(e, m->build_id))
			return e;
		hp_elf_put(e);
	}
	if (m->file && m->file[0] == '/') {
		e = hp_elf_open(NULL, m->file, -1, 0, 0);
		if (e && (!m->build_id || bid_eq(e, m->build_id)))
			return e;
		hp_elf_put(e);
		snprintf(path, sizeof(path), "/usr/lib/debug%s", m->file);
		e = hp_elf_open(NULL, path, -1, 0, 0);
		if (e && (!m->build_id || bid_eq(e, m->build_id)))
			return e;
		hp_elf_put(e);
	}
	return NULL;
}

int hp_symbolize_main(int argc, char **argv)
{
	const char *in = NULL, *out = NULL;
	struct hp_prof p;
	struct hp_elf **elfs;
	size_t i, done = 0, missing = 0, nomap = 0;
	char why[256];
	int rc;

	for (int a = 1; a < argc; a++) {
		if (!strcmp(argv[a], "-o") && a + 1 < argc)
			out = argv[++a];
		else if (argv[a][0] == '-' || in) {
			fprintf(stderr, "usage: heapprofctl symbolize FILE [-o OUT]\n");
			return 2;
		} else
			in = argv[a];
	}
	if (!in) {
		fprintf(stderr, "usage: heapprofctl symbolize FILE [-o OUT]\n");
		return 2;
	}
	if (!out)
		out = in;
	hp_symbolize_setup();	/* debuginfod lookups bounded */
	if (hp_pprof_read(&p, in, why, sizeof(why))) {
		fprintf(stderr, "symbolize: %s\n", why);
		return 1;
	}
	elfs = calloc(p.nmaps + 1, sizeof(*elfs));
	if (!elfs) {
		hp_prof_free(&p);
		return 1;
	}
	for (i = 0; i < p.nmaps; i++) {
		elfs[i] = find_elf(&p.maps[i]);
		if (!elfs[i])
			fprintf(stderr, "symbolize: no ELF file with build id %s for %s\n",
				p.maps[i].build_id ? p.maps[i].build_id : "(none)",
				p.maps[i].file ? p.maps[i].file : "?");
	}
	for (i = 0; i < p.nlocs; i++) {
		struct hp_prof_loc *l = &p.locs[i];
		const struct hp_prof_map *m;
		const struct hp_sym *s;
		uint64_t vaddr;

		if (l->func)
			continue;
		if (!l->map || l->map > p.nmaps || !elfs[l->map - 1]) {
			nomap++;
			continue;
		}
		m = &p.maps[l->map - 1];
		if (l->addr < m->start ||
		    hp_elf_off_to_vaddr(elfs[l->map - 1], l->addr - m->start + m->off, &vaddr)) {
			missing++;
			continue;
		}
		s = hp_symbolize(elfs[l->map - 1], vaddr);
		if (!s || !s->func) {
			missing++;
			continue;
		}
		hp_prof_set_sym(&p, (uint32_t)i, s);
		done++;
	}
	if (!done && missing + nomap) {
		/* Nothing gained: say so rather than write the same profile out. */
		fprintf(stderr, "symbolize: no location could be symbolized (%zu not found, %zu without a usable mapping); %s not written\n",
			missing, nomap, out);
		rc = -ENOENT;
	} else if ((rc = hp_pprof_write(&p, out, why, sizeof(why))) != 0) {
		fprintf(stderr, "symbolize: cannot write the profile: %s\n", why);
	} else {
		fprintf(stderr, "symbolize: %zu locations symbolized, %zu not found, %zu without a usable mapping -> %s\n",
			done, missing, nomap, out);
	}
	for (i = 0; i < p.nmaps; i++)
		hp_elf_put(elfs[i]);
	free(elfs);
	hp_prof_free(&p);
	return rc ? 1 : 0;
}
