// SPDX-License-Identifier: GPL-2.0
/* The sampler as a unit, against seed 000's theory, with fixed seeds. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../sampler.h"
#include "../../tests/tap.h"

/* Estimate of one allocation of size bytes on a fresh, seeded sampler
 * state that has already run for a while (stationary countdown). */
static uint64_t est_of(struct hp_sampler *s, uint64_t size, int *exact)
{
	uint32_t c = hp_sampler_account(s, size, exact);

	return *exact ? size : (uint64_t)c * s->interval;
}

static void test_unbiased(void)
{
	const uint64_t interval = 4096;
	const int runs = 200;
	double rel_sum = 0, worst = 0;
	int r;

	/* Each run: a workload of 200000 allocations of mixed sizes. The
	 * mean over runs of estimate / truth must be within 1% of 1. */
	for (r = 0; r < runs; r++) {
		struct hp_sampler s;
		uint64_t x = 1000 + r, truth = 0, est = 0;
		int i, exact;

		hp_sampler_init(&s, interval, 42 + r);
		for (i = 0; i < 200000; i++) {
			uint64_t v = hp_splitmix64(&x);
			uint64_t size = (v & 3) == 0 ? 1 + v % 64 :
					(v & 3) == 1 ? 64 + (v >> 8) % 2048 :
					(v & 3) == 2 ? 16 + (v >> 8) % 256 :
					(v >> 8) % 40000;

			truth += size;
			est += est_of(&s, size, &exact);
		}
		rel_sum += (double)est / (double)truth;
		if (fabs((double)est / (double)truth - 1) > worst)
			worst = fabs((double)est / (double)truth - 1);
	}
	tap_ok(fabs(rel_sum / runs - 1) < 0.01,
	       "sampler: mean estimate / truth = %.5f over %d runs (within 1%%; worst run %.3f)",
	       rel_sum / runs, runs, worst);
}

/* P(at least one sample) for one allocation, stationary countdown. */
static double p_sampled(uint64_t interval, uint64_t size, int trials,
			uint64_t seed, int *any_exact)
{
	struct hp_sampler s;
	int i, hits = 0, exact;
	uint64_t x = seed;

	*any_exact = 0;
	hp_sampler_init(&s, interval, seed);
	for (i = 0; i < trials; i++) {
		/* Burn a random amount so trials are independent of each
		 * other's alignment (memorylessness makes this moot, but the
		 * test should not rely on what it tests). */
		hp_sampler_account(&s, hp_splitmix64(&x) % interval, &exact);
		if (hp_sampler_account(&s, size, &exact))
			hits++;
		if (exact)
			*any_exact = 1;
	}
	return (double)hits / trials;
}

static void test_p_one(void)
{
	static const struct { uint64_t interval, size; } c[] = {
		{ 512 << 10, 1536 << 10 },	/* seed 000: >= 95% */
		{ 2048 << 10, 3584 << 10 },	/* seed 000: >= 80% */
		{ 4096, 4096 },
		{ 4096, 100 },
		{ 32768, 65536 },
	};
	const int trials = 200000;
	unsigned i;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		double th = 1 - exp(-(double)c[i].size / c[i].interval);
		double sd = sqrt(th * (1 - th) / trials);
		int ex;
		double p = p_sampled(c[i].interval, c[i].size, trials, 7 + i, &ex);

		tap_ok(fabs(p - th) < 4 * sd + 1e-4 && !ex,
		       "sampler: P(sampled) %llu B at %llu: %.4f vs 1-exp(-s/i) = %.4f (4 sd = %.4f)",
		       (unsigned long long)c[i].size,
		       (unsigned long long)c[i].interval, p, th, 4 * sd);
	}
	tap_ok(1 - exp(-3.0) >= 0.95 && 1 - exp(-1.75) >= 0.80,
	       "sampler: theory gives >= 95%% for 1.5 MiB at 512 KiB (%.4f) and >= 80%% for 3.5 MiB at 2 MiB (%.4f)",
	       1 - exp(-3.0), 1 - exp(-1.75));
}

/* Total T as one allocation or as k pieces: same mean, variance and
 * P(estimate == 0). */
static void test_split(void)
{
	const uint64_t interval = 4096, total = 3 * 4096;
	const int trials = 100000, ks[] = { 1, 3, 48 };
	double mean[3], var[3], pz[3];
	unsigned j;

	for (j = 0; j < 3; j++) {
		struct hp_sampler s;
		double sum = 0, sum2 = 0;
		int i, zero = 0, exact;

		hp_sampler_init(&s, interval, 99 + j);
		for (i = 0; i < trials; i++) {
			uint64_t est = 0;
			int k;

			for (k = 0; k < ks[j]; k++)
				est += est_of(&s, total / ks[j], &exact);
			sum += est;
			sum2 += (double)est * est;
			zero += !est;
		}
		mean[j] = sum / trials;
		var[j] = sum2 / trials - mean[j] * mean[j];
		pz[j] = (double)zero / trials;
	}
	/* Theory: est = interval * Poisson-ish(total/interval): mean = total,
	 * var ~= total * interval, P(0) = exp(-3). */
	tap_ok(fabs(mean[0] / total - 1) < 0.02 && fabs(mean[1] / total - 1) < 0.02 &&
	       fabs(mean[2] / total - 1) < 0.02 &&
	       fabs(var[1] / var[0] - 1) < 0.05 && fabs(var[2] / var[0] - 1) < 0.05 &&
	       fabs(pz[1] - pz[0]) < 0.005 && fabs(pz[2] - pz[0]) < 0.005,
	       "sampler: splitting 12 KiB into 1/3/48 pieces: mean %.0f/%.0f/%.0f var ratio %.3f/%.3f P0 %.4f/%.4f/%.4f",
	       mean[0], mean[1], mean[2], var[1] / var[0], var[2] / var[0],
	       pz[0], pz[1], pz[2]);
}

static void test_cutoff(void)
{
	const uint64_t interval = 8192;
	uint64_t cut = (uint64_t)(HP_LN100 * interval);
	struct hp_sampler s;
	int i, ok = 1, exact, hits = 0;
	const int trials = 100000;

	hp_sampler_init(&s, interval, 5);
	for (i = 0; i < 1000; i++) {
		int64_t before = s.countdown;
		uint32_t c = hp_sampler_account(&s, cut + 1 + i, &exact);

		if (c != 1 || !exact || s.countdown != before)
			ok = 0;
	}
	tap_ok(ok, "sampler: sizes above ln(100)*interval (%llu) are exact and leave the countdown alone",
	       (unsigned long long)cut);
	for (i = 0; i < trials; i++) {
		hp_sampler_account(&s, (uint64_t)i % interval, &exact);
		if (hp_sampler_account(&s, cut, &exact))
			hits++;
		if (exact)
			ok = 0;
	}
	tap_ok(ok && (double)hits / trials > 0.985,
	       "sampler: just below the cutoff P(sampled) = %.4f (~0.99), sampled not exact",
	       (double)hits / trials);
}

static void test_interval1(void)
{
	struct hp_sampler s;
	int i, ok = 1, exact;

	hp_sampler_init(&s, 1, 3);
	for (i = 0; i < 10000; i++) {
		uint32_t c = hp_sampler_account(&s, (uint64_t)i % 300, &exact);

		if (c != 1 || !exact)
			ok = 0;
	}
	tap_ok(ok, "sampler: interval 1 records every allocation (also size 0) exactly");
}

static void test_repeatable(void)
{
	struct hp_sampler a, b;
	int i, same = 1, e1, e2;

	hp_sampler_init(&a, 4096, 1234);
	hp_sampler_init(&b, 4096, 1234);
	for (i = 0; i < 100000; i++)
		if (hp_sampler_account(&a, i % 5000, &e1) !=
		    hp_sampler_account(&b, i % 5000, &e2))
			same = 0;
	tap_ok(same, "sampler: the same seed gives the same samples");
}

static void test_geometric_mean(void)
{
	struct hp_sampler s;
	double sum = 0;
	int i, n = 1000000;

	hp_sampler_init(&s, 1000, 77);
	for (i = 0; i < n; i++)
		sum += (double)hp_sampler_draw(&s);
	tap_ok(fabs(sum / n / 1000 - 1) < 0.005,
	       "sampler: mean draw %.2f for interval 1000", sum / n);
}

/*
 * The Exp(1) source of every draw (a ziggurat, sampler.c) against the
 * exponential distribution: its first two moments, tail probabilities from
 * inside the strips to beyond the base strip's edge (r = 7.697, where the
 * tail is drawn separately), and a chi-square over 256 bins of equal
 * probability. Bounds are 5 standard deviations (the seed is fixed).
 */
static void test_exp1(void)
{
	static const double at[] = { 0.01, 0.1, 0.5, 1, 2, 3, 5, 7.69, 7.7, 9, 11 };
	enum { N = 4000000, BINS = 256, NT = sizeof(at) / sizeof(at[0]) };
	static unsigned int bin[BINS];
	unsigned int above[NT] = { 0 };
	double sum = 0, sum2 = 0, chi2 = 0, worst = 0, e = (double)N / BINS;
	struct hp_sampler s;
	int i, t, tails_ok = 1;

	hp_sampler_init(&s, 4096, 2024);
	for (i = 0; i < N; i++) {
		double x = hp_sampler_exp1(&s);
		int b = (int)(-expm1(-x) * BINS);	/* F(x) = 1 - e^-x */

		sum += x;
		sum2 += x * x;
		bin[b < BINS ? b : BINS - 1]++;
		for (t = 0; t < NT; t++)
			above[t] += x > at[t];
	}
	for (t = 0; t < NT; t++) {
		double p = exp(-at[t]), got = (double)above[t] / N;
		double dev = fabs(got - p) / (sqrt(p * (1 - p) / N) + 1.0 / N);

		if (dev > worst)
			worst = dev;
		tails_ok &= dev < 5;
	}
	for (i = 0; i < BINS; i++)
		chi2 += (bin[i] - e) * (bin[i] - e) / e;
	tap_ok(fabs(sum / N - 1) < 5 / sqrt(N) && fabs(sum2 / N - 2) < 5 * sqrt(20.0 / N),
	       "sampler: Exp(1) draws have mean %.5f and E[x^2] %.5f (1 and 2)",
	       sum / N, sum2 / N);
	tap_ok(tails_ok, "sampler: Exp(1) tail probabilities P(x > t), t from 0.01 to 11, within %.2f sd",
	       worst);
	tap_ok(chi2 < (BINS - 1) + 5 * sqrt(2.0 * (BINS - 1)),
	       "sampler: Exp(1) chi-square over %d equiprobable bins %.1f (%d degrees of freedom)",
	       BINS, chi2, BINS - 1);
}

int main(void)
{
	test_exp1();
	test_geometric_mean();
	test_unbiased();
	test_p_one();
	test_split();
	test_cutoff();
	test_interval1();
	test_repeatable();
	return tap_failed ? 1 : 0;
}
