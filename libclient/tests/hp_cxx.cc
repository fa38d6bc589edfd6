// SPDX-License-Identifier: GPL-2.0
// A multi-threaded C++ program for the client tests: new/delete, containers,
// realloc chains and over-aligned allocations. Prints a checksum that must
// not change under the client.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

struct alignas(64) Line {
	unsigned long v[8];
};

static unsigned long work(int seed)
{
	unsigned long sum = 0;
	std::map<int, std::string> m;
	std::vector<std::unique_ptr<Line>> lines;

	for (int i = 0; i < 20000; i++) {
		std::string s(static_cast<size_t>((i * 37 + seed) % 300), 'a' + i % 26);
		m[i % 512] = s;
		sum += s.size();
		if (i % 7 == 0) {
			lines.emplace_back(new Line());
			lines.back()->v[0] = i;
			if ((reinterpret_cast<uintptr_t>(lines.back().get()) & 63) != 0)
				std::abort();
		}
		if (lines.size() > 100)
			lines.clear();
		int *arr = new int[i % 100 + 1];
		arr[0] = i;
		sum += arr[0] & 1;
		delete[] arr;
	}
	char *p = nullptr;
	for (int i = 1; i < 3000; i++) {
		p = static_cast<char *>(realloc(p, static_cast<size_t>(i) * 13));
		std::memset(p + (i - 1) * 13, i & 0x7f, 13);
		sum += static_cast<unsigned char>(p[(i - 1) * 13 / 2]);
	}
	free(p);
	void *q = aligned_alloc(4096, 8192);
	std::memset(q, 1, 8192);
	free(q);
	for (auto &kv : m)
		sum += kv.second.size() * static_cast<unsigned long>(kv.first);
	return sum;
}

int main()
{
	unsigned long sums[4];
	std::vector<std::thread> th;

	for (int t = 0; t < 4; t++)
		th.emplace_back([t, &sums] { sums[t] = work(t); });
	for (auto &t : th)
		t.join();
	std::printf("%lu %lu %lu %lu\n", sums[0], sums[1], sums[2], sums[3]);
	return 0;
}
