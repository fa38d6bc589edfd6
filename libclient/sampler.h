/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The byte sampler (seed 000): every byte is sampled with probability
 * 1/interval. The distance to the next sampled byte is drawn as a
 * geometric variable (the discrete twin of the exponential inter-arrival of
 * a Poisson process, so it is memoryless and its mean is exactly interval).
 * An allocation counts as many samples as draws it crosses and stands for
 * count * interval bytes. Allocations so large that P(at least one sample)
 * exceeds 99% (size > ln(100) * interval, about 4.6 * interval) are recorded
 * at their exact size without touching the countdown.
 *
 * The state is per thread; nothing here is shared.
 */
#ifndef HP_SAMPLER_H
#define HP_SAMPLER_H

#include <stdint.h>

struct hp_sampler {
	int64_t countdown;	/* bytes until the next sampled byte (>= 1) */
	uint64_t interval;
	uint64_t exact_above;	/* sizes above this are recorded exactly */
	double neg_inv_log1mp;	/* -1 / ln(1 - 1/interval) */
	uint64_t rng[2];	/* xorshift128+ */
};

#define HP_LN100 4.605170185988091

void hp_sampler_init(struct hp_sampler *s, uint64_t interval, uint64_t seed);
/* Change the interval; the countdown is drawn afresh (memorylessness makes
 * that legal at any point). */
void hp_sampler_set_interval(struct hp_sampler *s, uint64_t interval);
uint64_t hp_sampler_draw(struct hp_sampler *s);
/* An Exp(1) variate (the draw's source; for the tests). */
double hp_sampler_exp1(struct hp_sampler *s);

/*
 * The slow part of hp_sampler_account(): the countdown already had size
 * subtracted and fell to <= 0 (or size was exact-sized). Returns the number
 * of samples (0: not sampled) and sets *exact.
 */
uint32_t hp_sampler_slow(struct hp_sampler *s, uint64_t size, int *exact);

/* Account an allocation. The fast path is one subtraction and a branch. */
static inline uint32_t hp_sampler_account(struct hp_sampler *s, uint64_t size,
					  int *exact)
{
	*exact = 0;
	if (__builtin_expect((s->countdown -= (int64_t)size) > 0, 1))
		return 0;
	return hp_sampler_slow(s, size, exact);
}

uint64_t hp_splitmix64(uint64_t *x);

#endif /* HP_SAMPLER_H */
