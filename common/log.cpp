#include "common/log.hpp"

#include <mutex>

#include <spdlog/sinks/stdout_sinks.h>

namespace mcpmqtt::log {

namespace {

struct Registry {
  std::mutex mu;
  spdlog::sink_ptr sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  spdlog::level::level_enum level = spdlog::level::info;
  std::string pattern = "%Y-%m-%dT%H:%M:%S.%e %^%-5l%$ [%n] %v";
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

std::shared_ptr<spdlog::logger> get(const std::string& component) {
  auto& r = registry();
  std::lock_guard lock(r.mu);
  if (auto existing = spdlog::get(component)) return existing;
  auto logger = std::make_shared<spdlog::logger>(component, r.sink);
  logger->set_level(r.level);
  logger->set_pattern(r.pattern);
  spdlog::register_logger(logger);
  return logger;
}

bool set_level(const std::string& level) {
  const auto lvl = spdlog::level::from_str(level);
  // from_str maps unknown names to off; only accept "off" when it was asked for.
  if (lvl == spdlog::level::off && level != "off") return false;
  auto& r = registry();
  std::lock_guard lock(r.mu);
  r.level = lvl;
  spdlog::apply_all([lvl](const std::shared_ptr<spdlog::logger>& l) { l->set_level(lvl); });
  return true;
}

bool set_stderr_level(const std::string& level) {
  const auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off") return false;
  registry().sink->set_level(lvl);
  return true;
}

void configure_format(bool journal) {
  auto& r = registry();
  std::lock_guard lock(r.mu);
  r.pattern = journal ? "%-5l [%n] %v" : "%Y-%m-%dT%H:%M:%S.%e %^%-5l%$ [%n] %v";
  spdlog::apply_all([&](const std::shared_ptr<spdlog::logger>& l) { l->set_pattern(r.pattern); });
}

std::string duration_text(std::chrono::milliseconds d) {
  const auto ms = d.count();
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  return std::to_string(ms) + " ms";
}

}  // namespace mcpmqtt::log
