#include "plugin/log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>

#include "config/env.h"
#include "config/warnings.h"

namespace topocoll::plugin {
namespace {

std::atomic<ncclDebugLogger_t> g_logger{nullptr};

// The lower layers' warnings (a bad environment value, a stray connection) go where the
// plugin's own go: set when the library is loaded, before any of them can be raised.
void warn_through_nccl_log(const std::string& message) { TC_WARN("%s", message.c_str()); }
[[maybe_unused]] const bool g_warning_sink_installed = (config::set_warning_sink(&warn_through_nccl_log), true);

// NCCL_DEBUG as NCCL reads it: VERSION, WARN, INFO, TRACE (case-insensitive); unset = none.
// Read from the Env at every message, not cached here: reading the Env the first time may
// warn, and that warning comes back through this function.
ncclDebugLogLevel stderr_level() {
  const char* v = config::env().nccl_debug.c_str();
  if (!strcasecmp(v, "VERSION")) return NCCL_LOG_VERSION;
  if (!strcasecmp(v, "WARN")) return NCCL_LOG_WARN;
  if (!strcasecmp(v, "INFO")) return NCCL_LOG_INFO;
  if (!strcasecmp(v, "TRACE")) return NCCL_LOG_TRACE;
  return NCCL_LOG_NONE;
}

// NCCL_DEBUG_SUBSYS: comma list of subsystem names, "^" negates; unset = INIT,BOOTSTRAP,ENV.
unsigned long stderr_subsys() {
  const std::string& subsys = config::env().nccl_debug_subsys;
  if (subsys.empty()) return static_cast<unsigned long>(NCCL_INIT | NCCL_BOOTSTRAP | NCCL_ENV);
  const char* v = subsys.c_str();
  bool invert = v[0] == '^';
  if (invert) ++v;
  struct Name { const char* name; unsigned long bit; };
  static const Name names[] = {{"INIT", NCCL_INIT},   {"COLL", NCCL_COLL},   {"P2P", NCCL_P2P},
                               {"SHM", NCCL_SHM},     {"NET", NCCL_NET},     {"GRAPH", NCCL_GRAPH},
                               {"TUNING", NCCL_TUNING}, {"ENV", NCCL_ENV},   {"ALLOC", NCCL_ALLOC},
                               {"CALL", NCCL_CALL},   {"PROXY", NCCL_PROXY}, {"NVLS", NCCL_NVLS},
                               {"BOOTSTRAP", NCCL_BOOTSTRAP}, {"REG", NCCL_REG},
                               {"PROFILE", NCCL_PROFILE}, {"RAS", NCCL_RAS},
                               {"ALL", static_cast<unsigned long>(NCCL_ALL)}};
  unsigned long m = 0;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s", v);
  for (char* save = nullptr, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(nullptr, ",", &save))
    for (const auto& n : names)
      if (!strcasecmp(tok, n.name)) m |= n.bit;
  return invert ? ~m : m;
}

}  // namespace

void set_nccl_logger(ncclDebugLogger_t logger) { g_logger.store(logger); }

namespace {
thread_local char t_last_warning[1024] = "";
}  // namespace

const char* last_warning_on_this_thread() { return t_last_warning; }
void clear_last_warning_on_this_thread() { t_last_warning[0] = '\0'; }
void set_last_warning_on_this_thread(const char* text) {
  std::snprintf(t_last_warning, sizeof t_last_warning, "%s", text);
}

void log_message(ncclDebugLogLevel level, unsigned long subsys, const char* file, int line,
                 const char* fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (level == NCCL_LOG_WARN) std::memcpy(t_last_warning, msg, sizeof msg);

  if (ncclDebugLogger_t logger = g_logger.load()) {
    logger(level, subsys, file, line, "%s", msg);
    return;
  }
  ncclDebugLogLevel want = stderr_level();
  if (want < level) return;
  if (level == NCCL_LOG_INFO && !(subsys & stderr_subsys())) return;
  char host[64] = "?";
  gethostname(host, sizeof host - 1);
  if (char* dot = std::strchr(host, '.')) *dot = '\0';
  const char* tag = level == NCCL_LOG_WARN ? "WARN" : level == NCCL_LOG_TRACE ? "TRACE" : "INFO";
  std::fprintf(stderr, "%s:%d:%ld NCCL %s %s\n", host, static_cast<int>(getpid()),
               static_cast<long>(syscall(SYS_gettid)), tag, msg);
}

}  // namespace topocoll::plugin
