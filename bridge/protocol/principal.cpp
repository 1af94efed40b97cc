#include "bridge/protocol/principal.hpp"

#include "bridge/protocol/topics.hpp"

namespace mcpmqtt::bridge {

bool Principal::may_reach(std::string_view server_name) const {
  if (unrestricted) return true;
  for (const auto& f : server_filters)
    if (topics::filter_matches(f, server_name)) return true;
  return false;
}

}  // namespace mcpmqtt::bridge
