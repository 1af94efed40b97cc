#include "stdio/line_splitter.hpp"

#include <catch2/catch.hpp>

namespace mcpmqtt::stdio {
namespace {

std::vector<LineSplitter::Line> feed_all(LineSplitter& s,
                                         std::initializer_list<std::string> chunks) {
  std::vector<LineSplitter::Line> out;
  for (const auto& c : chunks)
    s.feed(c, [&](LineSplitter::Line&& l) { out.push_back(std::move(l)); });
  return out;
}

TEST_CASE("line splitter: lines across chunk boundaries, CRLF and empty lines", "[stdio]") {
  LineSplitter s(100);
  const auto lines = feed_all(s, {"ab", "c\nde", "f\r\n\n", "\r\nlast"});
  REQUIRE(lines.size() == 4);
  CHECK(lines[0].text == "abc");
  CHECK(lines[1].text == "def");
  CHECK(lines[1].size == 3);
  CHECK(lines[2].text.empty());
  CHECK(lines[3].text.empty());
  CHECK_FALSE(lines[0].too_long);
  CHECK(s.buffered() == 4);
  const auto last = s.finish();
  REQUIRE(last);
  CHECK(last->text == "last");
  CHECK_FALSE(s.finish());
}

TEST_CASE("line splitter: a line at the limit passes, one byte more is too long", "[stdio]") {
  LineSplitter s(5, 3);
  const auto lines = feed_all(s, {"12345\n", "12345\r\n", "123456\n", "ok\n"});
  REQUIRE(lines.size() == 4);
  CHECK(lines[0].text == "12345");
  CHECK_FALSE(lines[0].too_long);
  CHECK(lines[1].text == "12345");  // the CR of CRLF does not count
  CHECK_FALSE(lines[1].too_long);
  CHECK(lines[2].too_long);
  CHECK(lines[2].size == 6);
  CHECK(lines[2].text == "123");  // only the kept beginning
  CHECK(lines[3].text == "ok");
  CHECK_FALSE(lines[3].too_long);
}

TEST_CASE("line splitter: memory stays bounded whatever the line length", "[stdio]") {
  LineSplitter s(1000, 10);
  const std::string chunk(64 * 1024, 'x');
  std::vector<LineSplitter::Line> lines;
  for (int i = 0; i < 64; ++i) {  // a 4 MiB line without a newline
    s.feed(chunk, [&](LineSplitter::Line&& l) { lines.push_back(std::move(l)); });
    REQUIRE(s.buffered() <= 1001);
  }
  s.feed("\r\nnext\n", [&](LineSplitter::Line&& l) { lines.push_back(std::move(l)); });
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].too_long);
  CHECK(lines[0].size == 64u * 64 * 1024);
  CHECK(lines[0].text == std::string(10, 'x'));
  CHECK(lines[1].text == "next");
  CHECK_FALSE(lines[1].too_long);
}

TEST_CASE("line splitter: a too-long unterminated last line is reported at the end", "[stdio]") {
  LineSplitter s(4, 2);
  feed_all(s, {"abcdefgh"});
  const auto last = s.finish();
  REQUIRE(last);
  CHECK(last->too_long);
  CHECK(last->size == 8);
  CHECK(last->text == "ab");
}

}  // namespace
}  // namespace mcpmqtt::stdio
