#include "common/log.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <ctime>

namespace nvmf {

namespace {
// Components register themselves during static initialisation; registration happens before
// main() on one thread, so a plain pointer head is enough. Lookups later only read it.
LogComponent* g_components = nullptr;
std::atomic<int> g_default_level{static_cast<int>(LogLevel::notice)};

struct SinkSlot {
  std::atomic<LogSink> sink{nullptr};
  std::atomic<void*> ctx{nullptr};
};
SinkSlot g_sink;

constexpr const char* kLevelNames[] = {"error", "warn", "notice", "info", "debug"};

void write_stderr(LogLevel, const char*, const char* line, void*) {
  size_t length = strlen(line);
  // One write(2) per line keeps lines from different threads whole.
  ssize_t written = write(STDERR_FILENO, line, length);
  (void)written;
}
}  // namespace

LogComponent::LogComponent(const char* component_name) noexcept
    : name(component_name), level(g_default_level.load()), next(g_components) {
  g_components = this;
}

const char* log_level_name(LogLevel level) noexcept {
  auto index = static_cast<int>(level);
  if (index < 0 || index > static_cast<int>(LogLevel::debug)) return "?";
  return kLevelNames[index];
}

bool log_level_parse(const char* text, LogLevel* level) noexcept {
  for (int i = 0; i <= static_cast<int>(LogLevel::debug); ++i) {
    if (strcmp(text, kLevelNames[i]) == 0) {
      *level = static_cast<LogLevel>(i);
      return true;
    }
  }
  return false;
}

void log_set_level(LogLevel level) noexcept {
  g_default_level.store(static_cast<int>(level));
  for (LogComponent* c = g_components; c != nullptr; c = c->next) {
    c->level.store(static_cast<int>(level), std::memory_order_relaxed);
  }
}

bool log_set_level(const char* component_name, LogLevel level) noexcept {
  for (LogComponent* c = g_components; c != nullptr; c = c->next) {
    if (strcmp(c->name, component_name) == 0) {
      c->level.store(static_cast<int>(level), std::memory_order_relaxed);
      return true;
    }
  }
  return false;
}

LogLevel log_get_level(const LogComponent& component) noexcept {
  return static_cast<LogLevel>(component.level.load(std::memory_order_relaxed));
}

void log_set_sink(LogSink sink, void* ctx) noexcept {
  g_sink.ctx.store(ctx);
  g_sink.sink.store(sink);
}

void log_reset_sink() noexcept { log_set_sink(nullptr, nullptr); }

void log_vwrite(const LogComponent& component, LogLevel level, const char* file, int line,
                const char* format, va_list args) noexcept {
  // 1 KiB keeps a line on the stack; longer messages are cut, and say so.
  char buffer[1024];
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  tm local{};
  localtime_r(&now.tv_sec, &local);
  const char* base = strrchr(file, '/');
  base = base ? base + 1 : file;
  int prefix = snprintf(buffer, sizeof(buffer), "[%02d:%02d:%02d.%06ld] %-6s %s %s:%d: ",
                        local.tm_hour, local.tm_min, local.tm_sec, now.tv_nsec / 1000,
                        log_level_name(level), component.name, base, line);
  if (prefix < 0) return;
  size_t used = static_cast<size_t>(prefix) < sizeof(buffer) ? static_cast<size_t>(prefix)
                                                              : sizeof(buffer) - 1;
  int body = vsnprintf(buffer + used, sizeof(buffer) - used, format, args);
  if (body < 0) body = 0;
  used += static_cast<size_t>(body);
  constexpr char kCut[] = "...(cut)\n";
  if (used >= sizeof(buffer) - 1) {
    memcpy(buffer + sizeof(buffer) - sizeof(kCut), kCut, sizeof(kCut));
  } else if (used == 0 || buffer[used - 1] != '\n') {
    buffer[used] = '\n';
    buffer[used + 1] = '\0';
  }
  LogSink sink = g_sink.sink.load();
  if (sink != nullptr) {
    sink(level, component.name, buffer, g_sink.ctx.load());
  } else {
    write_stderr(level, component.name, buffer, nullptr);
  }
}

void log_write(const LogComponent& component, LogLevel level, const char* file, int line,
               const char* format, ...) noexcept {
  va_list args;
  va_start(args, format);
  log_vwrite(component, level, file, line, format, args);
  va_end(args);
}

}  // namespace nvmf
