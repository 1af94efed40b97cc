// mcp-mqtt-bridge.conf(5) (man/mcp-mqtt-bridge.conf.5) documents every key of the configuration
// model, and documents no key the model does not have. A key is documented by a paragraph that
// starts `.IP "\fBpath\fR`, the path as config::key_paths() gives it.
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

#include "config/config.hpp"

namespace {

std::set<std::string> documented_keys(const std::string& page) {
  std::set<std::string> keys;
  static const std::regex paragraph(R"re(^\.IP "\\fB([A-Za-z0-9_.$]+)\\fR)re");
  std::istringstream in(page);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, paragraph)) keys.insert(m[1]);
  }
  return keys;
}

}  // namespace

TEST_CASE(
    "mcp-mqtt-bridge.conf(5) documents every key of the configuration model, with its type and "
    "default, and no key the model does not have (the older *_s keys as such)",
    "[config][docs]") {
  std::ifstream in(std::string(MCPMQTT_SOURCE_DIR) + "/man/mcp-mqtt-bridge.conf.5");
  REQUIRE(in);
  std::stringstream ss;
  ss << in.rdbuf();
  const auto documented = documented_keys(ss.str());
  const auto model = mcpmqtt::config::key_paths();
  REQUIRE(model.size() > 100);
  for (const auto& key : model) {
    INFO(key);
    CHECK(documented.count(key) == 1);
  }
  const std::set<std::string> known(model.begin(), model.end());
  for (const auto& key : documented) {
    // An older key in whole seconds is documented beside the one in milliseconds.
    const bool alias =
        key.size() > 2 && key.ends_with("_s") && known.count(key.substr(0, key.size() - 2) + "_ms");
    INFO(key);
    CHECK((known.count(key) == 1 || alias));
  }
}
