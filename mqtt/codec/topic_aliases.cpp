// Topic aliases a broker sets up toward a client (§3.3.2.3.4).
#include "mqtt/codec/codec.hpp"

namespace mcpmqtt::mqtt::codec {

Result<std::string_view> TopicAliases::resolve(std::string_view topic,
                                               std::optional<std::uint16_t> alias) {
  if (!alias) {
    // §3.3.2.3.4: a zero-length Topic Name without a Topic Alias is a Protocol Error.
    if (topic.empty()) {
      return Error{reason::protocol_error, "PUBLISH with neither Topic Name nor Topic Alias"};
    }
    return topic;
  }
  // [MQTT-3.3.2-8]: 0 is never an alias; [MQTT-3.3.2-11]: none above the Topic Alias Maximum
  // we sent in CONNECT.
  if (*alias == 0) {
    return Error{reason::topic_alias_invalid, "Topic Alias 0"};
  }
  if (*alias > maximum_) {
    return Error{reason::topic_alias_invalid, "Topic Alias above the Topic Alias Maximum we sent"};
  }
  const std::size_t index = *alias - 1u;
  if (!topic.empty()) {
    // Grown only as far as the aliases the broker uses: no memory until the first one.
    if (index >= topics_.size()) topics_.resize(index + 1);
    topics_[index].assign(topic);
    return topic;
  }
  // The view returned is into our copy: valid until the next resolve() or clear().
  if (index >= topics_.size() || topics_[index].empty()) {
    return Error{reason::topic_alias_invalid, "Topic Alias used before a PUBLISH defined it"};
  }
  return std::string_view(topics_[index]);
}

}  // namespace mcpmqtt::mqtt::codec
