// SEP-1803 (event subscriptions) vocabulary as pure functions: which subscription an update
// reaches.
//
// SEP-1803 §In-Band Subscribe and Unsubscribe: the `uri` of `notifications/resources/updated`
// "might be a sub-resource of the one that the client actually subscribed to". The bridge's rule
// (README, "Resource updates and subscriptions/listen"): an update reaches a subscription when its
// URI equals the subscribed URI, or starts with the subscribed URI immediately followed by '/',
// '?' or '#' — so `event://x/tick` covers `event://x/tick/7`, `event://x/tick?a=1` and
// `event://x/tick#f`, but not `event://x/ticks`.
//
// Thread-safe (no state).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mcpmqtt::events {

// The subscription to `subscribed` covers an update of `updated`.
bool covers(std::string_view subscribed, std::string_view updated);

// Every URI whose subscription covers `updated`, longest first: `updated` itself, then each of
// its prefixes that ends right before a '/', '?' or '#'. Looking these up is how a router finds
// the covering subscriptions without visiting all of them.
std::vector<std::string_view> covering(std::string_view updated);

// What a server's initialize result (its text) says about events (SEP-1803 §Capability
// Advertisement).
struct Capabilities {
  bool subscribe = false;  // resources.subscribe: in-band events can be subscribed to
  bool webhook = false;    // "webhook" in resources.subscription: it serves webhooks itself
};
Capabilities capabilities(std::string_view initialize_result);

// The initialize result with "webhook" added to resources.subscription (the array made when
// absent), every other byte as the server wrote it; nullopt when the text is not an object
// with capabilities.resources.
std::optional<std::string> with_webhook(std::string_view initialize_result);

// The resources/list result `list_result` with `items` (JSON objects separated by commas, no
// brackets) appended to its `resources` array, every other byte as the server wrote it; nullopt
// when the text has no `resources` array.
std::optional<std::string> with_resources_appended(std::string_view list_result,
                                                   std::string_view items);

// `uri` is an expansion of the RFC 6570 template `uri_template` (SEP-1803 event templates,
// such as `event://orders/{id}`): literal parts match exactly; an expression matches what its
// operator can expand to — `{x}` text without '/', '?' or '#'; `{+x}` and `{#x}` anything (the
// latter after '#'); `{/x}`, `{.x}`, `{;x}` segments after their prefix; `{?x}`, `{&x}` a query
// part — or nothing (an undefined variable). An ill-formed template matches nothing.
bool template_matches(std::string_view uri_template, std::string_view uri);

inline constexpr std::string_view kRegister = "resources/subscriptions/register";
inline constexpr std::string_view kDeregister = "resources/subscriptions/deregister";
inline constexpr std::string_view kSubscriptionScheme = "subscription://";

}  // namespace mcpmqtt::events
