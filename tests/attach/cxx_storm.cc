// SPDX-License-Identifier: GPL-2.0
/*
 * A C++ program started without the client (tests/attach/run): operator
 * new and delete reach the client's hooks through the C++ runtime's own
 * GOT entries for malloc and free.
 *   cxx_storm DIR   prints "ready PID"; two threads churn with new/delete;
 *                   on DIR/go1, new_site allocates 128 x 64 KiB with new[]
 *                   (kept), then DIR/done1; on DIR/stop it exits 0.
 */
#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>
#include <time.h>
#include <unistd.h>

static std::atomic<bool> stopping{false};
static std::string dir;

static bool has(const char *name)
{
	return access((dir + "/" + name).c_str(), F_OK) == 0;
}

static void nap()
{
	struct timespec ts = { 0, 2000000 };

	nanosleep(&ts, nullptr);
}

__attribute__((noinline)) static std::vector<char *> new_site()
{
	std::vector<char *> v;

	v.reserve(128);
	for (int i = 0; i < 128; i++) {
		char *p = new char[64 * 1024];

		memset(p, i, 64 * 1024);
		v.push_back(p);
	}
	return v;
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	dir = argv[1];
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	std::vector<std::thread> th;
	for (int t = 0; t < 2; t++)
		th.emplace_back([] {
			unsigned n = 0;

			while (!stopping) {
				auto *s = new std::string(16 + n++ % 2000, 'x');
				auto *v = new std::vector<int>(n % 500);

				delete s;
				delete v;
			}
		});
	while (!has("go1"))
		nap();
	std::vector<char *> kept = new_site();
	FILE *f = fopen((dir + "/done1").c_str(), "w");
	if (f)
		fclose(f);
	while (!has("stop"))
		nap();
	stopping = true;
	for (auto &t : th)
		t.join();
	for (char *p : kept)
		delete[] p;
	printf("exit\n");
	return 0;
}
