// SPDX-License-Identifier: GPL-2.0
/*
 * Offline symbolization of a profile (`heapprofctl symbolize`): its
 * unnamed locations get names from the ELF files its mappings name, found
 * by build id under /usr/lib/debug or as the file itself.
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

int hp_prof_symbolize(struct hp_prof *p, struct hp_prof_symbolized *n, FILE *warn)
{
	struct hp_elf **elfs;
	size_t i;

	memset(n, 0, sizeof(*n));
	hp_symbolize_setup();	/* debuginfod lookups bounded */
	elfs = calloc(p->nmaps + 1, sizeof(*elfs));
	if (!elfs)
		return -ENOMEM;
	for (i = 0; i < p->nmaps; i++) {
		elfs[i] = find_elf(&p->maps[i]);
		if (!elfs[i] && warn)
			fprintf(warn, "symbolize: no ELF file with build id %s for %s\n",
				p->maps[i].build_id ? p->maps[i].build_id : "(none)",
				p->maps[i].file ? p->maps[i].file : "?");
	}
	for (i = 0; i < p->nlocs; i++) {
		struct hp_prof_loc *l = &p->locs[i];
		const struct hp_prof_map *m;
		const struct hp_sym *s;
		uint64_t vaddr;

		if (l->func)
			continue;
		if (!l->map || l->map > p->nmaps || !elfs[l->map - 1]) {
			n->nomap++;
			continue;
		}
		m = &p->maps[l->map - 1];
		if (l->addr < m->start ||
		    hp_elf_off_to_vaddr(elfs[l->map - 1], l->addr - m->start + m->off, &vaddr)) {
			n->missing++;
			continue;
		}
		s = hp_symbolize(elfs[l->map - 1], vaddr);
		if (!s || !s->func) {
			n->missing++;
			continue;
		}
		hp_prof_set_sym(p, (uint32_t)i, s);
		n->done++;
	}
	for (i = 0; i < p->nmaps; i++)
		hp_elf_put(elfs[i]);
	free(elfs);
	return 0;
}
