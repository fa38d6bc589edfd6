// SPDX-License-Identifier: GPL-2.0
// bench/peers/suite: clang++ -fsyntax-only on this file (one thread): the
// standard library's headers and a few template instantiations, which is
// most of what a compiler front end allocates for.
#include <algorithm>
#include <chrono>
#include <functional>
#include <future>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <variant>
#include <vector>

template <int N> struct Fib { static constexpr long v = Fib<N - 1>::v + Fib<N - 2>::v; };
template <> struct Fib<1> { static constexpr long v = 1; };
template <> struct Fib<0> { static constexpr long v = 0; };

template <typename K, typename V> std::map<K, std::vector<V>> group(const std::vector<std::pair<K, V>> &in)
{
	std::map<K, std::vector<V>> out;
	for (const auto &[k, v] : in)
		out[k].push_back(v);
	return out;
}

int main()
{
	std::vector<std::pair<std::string, int>> a{{"a", 1}, {"b", 2}};
	std::unordered_map<std::string, std::variant<int, double, std::string>> m;
	std::regex re("[a-z]+([0-9]*)");
	auto g = group(a);
	auto f = std::async(std::launch::deferred, [&] { return g.size() + Fib<60>::v; });
	std::ostringstream os;
	os << f.get() << std::regex_match("abc1", re) << m.size();
	std::cout << os.str() << "\n";
	return 0;
}
