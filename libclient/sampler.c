// SPDX-License-Identifier: GPL-2.0
/* The seed-000 sampler: geometric draws, sample counts, the 99% cutoff. */
#include <math.h>
#include <pthread.h>

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

#define TWO53	9007199254740992.0

/* Uniform in (0, 1]: never log(0). */
static double uniform_open0(struct hp_sampler *s)
{
	return (double)((rng_next(s) >> 11) + 1) * (1.0 / TWO53);
}

/*
 * Exp(1) variates by the ziggurat method (Marsaglia and Tsang, "The
 * Ziggurat Method for Generating Random Variables", 2000), because -log(u)
 * cost more than everything else a sample's draw does (about 20 ns a
 * logarithm here). The area under e^-x is cut into ZIG_N strips of equal
 * area ZIG_V: strip 0 is the base rectangle [0, r) x [0, e^-r) together
 * with the tail beyond r; strip i >= 1 spans x in [0, x[i-1]) and y from
 * e^-x[i-1] up to e^-x[i], with x[0] = r and x[ZIG_N - 1] = 0. A draw picks
 * a strip and a point x uniform across its width. Left of the strip's inner
 * edge (x[i]; r for the base) the point is under the curve whatever its
 * height: accepted by one integer comparison, about 98% of draws. Otherwise
 * the wedge between the inner edge and the width is decided by a uniform
 * height against e^-x, and the base strip's overhang stands for the tail,
 * drawn as r + Exp(1) (memoryless). The strip comes from the top 8 bits of
 * one 64-bit draw and the position from 53 bits below them: disjoint bits,
 * and not xorshift128+'s weak lowest ones.
 */
#define ZIG_N	256
#define ZIG_R	7.69711747013104972	/* r for 256 strips */
#define ZIG_V	0.0039496598225815571993	/* each strip's area */

/* A strip's two numbers share one cache line (a draw comes once per
 * sample: the table is seldom in cache). 4 KiB in all. */
static struct {
	uint64_t k;	/* accept at once when j < k: the inner edge is k * w */
	double w;	/* x = j * w: the width / 2^53 */
} zig[ZIG_N];
static pthread_once_t zig_once = PTHREAD_ONCE_INIT;

static void zig_init(void)
{
	double x[ZIG_N], width, inner;
	int i;

	x[0] = ZIG_R;
	for (i = 1; i < ZIG_N - 1; i++)	/* each strip's area is ZIG_V */
		x[i] = -log(ZIG_V / x[i - 1] + exp(-x[i - 1]));
	x[ZIG_N - 1] = 0;
	for (i = 0; i < ZIG_N; i++) {
		width = i ? x[i - 1] : ZIG_V / exp(-ZIG_R);
		inner = i ? x[i] : ZIG_R;
		zig[i].k = (uint64_t)(inner / width * TWO53);
		zig[i].w = width / TWO53;
	}
}

double hp_sampler_exp1(struct hp_sampler *s)
{
	for (;;) {
		uint64_t r = rng_next(s), j = (r >> 3) & ((1ULL << 53) - 1);
		unsigned int i = (unsigned int)(r >> 56);
		double x = (double)j * zig[i].w, lo, hi;

		if (j < zig[i].k)
			return x;
		if (i == 0)
			return ZIG_R - log(uniform_open0(s));
		/* The strip's heights: e^-width at its bottom, e^-inner edge at
		 * its top (computed here: this is about 2% of draws). */
		lo = exp(-(zig[i].w * TWO53));
		hi = exp(-((double)zig[i].k * zig[i].w));
		if (lo + (1.0 - uniform_open0(s)) * (hi - lo) < exp(-x))
			return x;
	}
}

/* A number of bytes >= 1, geometric with mean interval. */
uint64_t hp_sampler_draw(struct hp_sampler *s)
{
	double t;
	uint64_t g;

	if (s->interval <= 1)
		return 1;
	t = hp_sampler_exp1(s) * s->neg_inv_log1mp;
	if (t > 9.0e18)
		return (uint64_t)9.0e18;
	/* ceil(t), at least 1, without a call into libm (no SSE4.1 here) */
	g = (uint64_t)t;
	g += (double)g < t;
	return g ? g : 1;
}

void hp_sampler_set_interval(struct hp_sampler *s, uint64_t interval)
{
	/* Every sampler is set up here before its first draw. */
	pthread_once(&zig_once, zig_init);
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
