// printf-style logging with levels and components. Cheap when filtered out: the level check
// is one relaxed atomic load before any formatting. A sink can be swapped in for tests.
// Thread-safe: lines are formatted into a stack buffer and written with one write(2) call.
#pragma once

#include <atomic>
#include <cstdarg>

namespace nvmf {

enum class LogLevel : int { error = 0, warn = 1, notice = 2, info = 3, debug = 4 };

const char* log_level_name(LogLevel level) noexcept;
// Parses "error", "warn", "notice", "info" or "debug"; false for anything else.
bool log_level_parse(const char* text, LogLevel* level) noexcept;

// A component is a named subsystem ("reactor", "bdev", ...) with its own level, so one layer
// can be turned up to debug without flooding the rest. Define one per layer with
// NVMF_LOG_COMPONENT(name) in a .cpp and declare it with NVMF_LOG_COMPONENT_DECLARE(name).
struct LogComponent {
  const char* name;
  std::atomic<int> level;  // a LogLevel; starts at the global default
  LogComponent* next;      // registry list, filled by constructors before main()

  explicit LogComponent(const char* component_name) noexcept;
};

// Sets the level of every component, or of one by name (false if no such component).
void log_set_level(LogLevel level) noexcept;
bool log_set_level(const char* component_name, LogLevel level) noexcept;
LogLevel log_get_level(const LogComponent& component) noexcept;

// Where finished lines go. The default writes to stderr. Tests install their own to capture.
using LogSink = void (*)(LogLevel level, const char* component, const char* line, void* ctx);
void log_set_sink(LogSink sink, void* ctx) noexcept;
void log_reset_sink() noexcept;

void log_write(const LogComponent& component, LogLevel level, const char* file, int line,
               const char* format, ...) noexcept __attribute__((format(printf, 5, 6)));
void log_vwrite(const LogComponent& component, LogLevel level, const char* file, int line,
                const char* format, va_list args) noexcept __attribute__((format(printf, 5, 0)));

inline bool log_enabled(const LogComponent& component, LogLevel level) noexcept {
  return static_cast<int>(level) <= component.level.load(std::memory_order_relaxed);
}

}  // namespace nvmf

#define NVMF_LOG_COMPONENT_DECLARE(name) extern ::nvmf::LogComponent nvmf_log_component_##name
#define NVMF_LOG_COMPONENT(name) ::nvmf::LogComponent nvmf_log_component_##name(#name)

#define NVMF_LOG(name, lvl, ...)                                                          \
  do {                                                                                    \
    if (::nvmf::log_enabled(nvmf_log_component_##name, ::nvmf::LogLevel::lvl))            \
      ::nvmf::log_write(nvmf_log_component_##name, ::nvmf::LogLevel::lvl, __FILE__,       \
                        __LINE__, __VA_ARGS__);                                           \
  } while (0)

#define NVMF_ERRLOG(name, ...) NVMF_LOG(name, error, __VA_ARGS__)
#define NVMF_WARNLOG(name, ...) NVMF_LOG(name, warn, __VA_ARGS__)
#define NVMF_NOTICELOG(name, ...) NVMF_LOG(name, notice, __VA_ARGS__)
#define NVMF_INFOLOG(name, ...) NVMF_LOG(name, info, __VA_ARGS__)
#define NVMF_DEBUGLOG(name, ...) NVMF_LOG(name, debug, __VA_ARGS__)
