// SPDX-License-Identifier: GPL-2.0
/* The seed-000 sampler: geometric draws, sample counts, the 99% cutoff. */
#include <math.h>

#include "sampler.h"

uint64_t hp_splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t rng_next(struct hp_sampler *s)
{
	uint64_t a = s->rng[0];
	const uint64_t b = s->rng[1];

	s->rng[0] = b;
	a ^= a << 23;
	s->rng[1] = a ^ b ^ (a >> 17) ^ (b >> 26);
	return s->rng[1] + b;
}

/* A number of bytes >= 1, geometric with mean interval. */
uint64_t hp_sampler_draw(struct hp_sampler *s)
{
	double u, g;

	if (s->interval <= 1)
		return 1;
	/* u uniform in (0, 1]: never log(0). */
	u = ((rng_next(s) >> 11) + 1) * (1.0 / 9007199254740992.0);
	g = ceil(-log(u) * s->neg_inv_log1mp);
	if (g < 1)
		g = 1;
	if (g > 9.0e18)
		g = 9.0e18;
	return (uint64_t)g;
}

void hp_sampler_set_interval(struct hp_sampler *s, uint64_t interval)
{
	if (!interval)
		interval = 1;
	s->interval = interval;
	if (interval > 1) {
		s->neg_inv_log1mp = -1.0 / log1p(-1.0 / (double)interval);
		s->exact_above = (uint64_t)(HP_LN100 * (double)interval);
	} else {
		s->neg_inv_log1mp = 0;
		s->exact_above = 0;
	}
	/* Interval 1: a countdown of 0 sends every allocation, even of zero
	 * bytes, to the slow path. */
	s->countdown = interval > 1 ? (int64_t)hp_sampler_draw(s) : 0;
}

void hp_sampler_init(struct hp_sampler *s, uint64_t interval, uint64_t seed)
{
	uint64_t x = seed;

	s->rng[0] = hp_splitmix64(&x);
	s->rng[1] = hp_splitmix64(&x);
	if (!s->rng[0] && !s->rng[1])
		s->rng[1] = 1;
	hp_sampler_set_interval(s, interval);
}

uint32_t hp_sampler_slow(struct hp_sampler *s, uint64_t size, int *exact)
{
	uint32_t count = 0;

	*exact = 0;
	if (s->interval <= 1) {
		/* Every allocation, exactly; the countdown stays at 0. */
		s->countdown = 0;
		*exact = 1;
		return 1;
	}
	if (size > s->exact_above) {
		/* P(sampled) > 99%: take the size as it is, leave the
		 * countdown where it was before this allocation. */
		s->countdown += (int64_t)size;
		*exact = 1;
		return 1;
	}
	while (s->countdown <= 0) {
		s->countdown += (int64_t)hp_sampler_draw(s);
		count++;
	}
	return count;
}
