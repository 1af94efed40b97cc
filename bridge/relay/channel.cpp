#include "bridge/relay/channel.hpp"

namespace mcpmqtt::bridge {

const char* to_string(CloseReason::Kind kind) {
  switch (kind) {
    case CloseReason::Kind::normal:
      return "closed";
    case CloseReason::Kind::peer_gone:
      return "peer gone";
    case CloseReason::Kind::exited:
      return "process exited";
    case CloseReason::Kind::timeout:
      return "timed out";
    case CloseReason::Kind::error:
      return "error";
    case CloseReason::Kind::shutdown:
      return "shutting down";
  }
  return "?";
}

}  // namespace mcpmqtt::bridge
