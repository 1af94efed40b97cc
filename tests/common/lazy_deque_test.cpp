#include "common/lazy_deque.hpp"

#include <string>
#include <vector>

#include <catch2/catch.hpp>

using mcpmqtt::LazyDeque;

namespace {

std::vector<std::string> items(const LazyDeque<std::string>& d) {
  return std::vector<std::string>(d.begin(), d.end());
}

}  // namespace

TEST_CASE("LazyDeque: a queue like std::deque, empty before its first element and after clear",
          "[common]") {
  LazyDeque<std::string> d;
  CHECK(d.empty());
  CHECK(d.size() == 0);
  CHECK(d.begin() == d.end());  // iterable before anything was added
  CHECK(items(d).empty());
  CHECK(d.view().empty());

  d.push_back("b");
  d.push_front("a");
  d.emplace_back(2, 'c');
  CHECK(d.size() == 3);
  CHECK(d.front() == "a");
  CHECK(d.back() == "cc");
  CHECK(items(d) == std::vector<std::string>{"a", "b", "cc"});

  // Copies and moves keep the elements; a moved-from one is empty and usable.
  LazyDeque<std::string> copy = d;
  LazyDeque<std::string> moved = std::move(d);
  CHECK(d.empty());
  d.push_back("again");
  CHECK(items(d) == std::vector<std::string>{"again"});
  CHECK(items(copy) == items(moved));

  moved.erase(std::next(moved.view().begin()));
  CHECK(items(moved) == std::vector<std::string>{"a", "cc"});
  moved.pop_front();
  moved.pop_back();
  CHECK(moved.empty());
  copy.clear();
  CHECK(copy.empty());
  CHECK(copy.begin() == copy.end());
  copy.push_back("x");
  CHECK(copy.size() == 1);
}
