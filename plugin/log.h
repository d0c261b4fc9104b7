// Logging of the plugin faces through NCCL's logger (handed to net/tuner init), so messages
// appear with NCCL_DEBUG=INFO/WARN and NCCL_DEBUG_SUBSYS like NCCL's own. Before a logger is
// known (the interposer never gets one), messages go to stderr in NCCL's format, filtered
// by NCCL_DEBUG the same way (read from the process's Env, config/env.h). Loaded into a
// process, this is also where the layers below send their warnings (config/warnings.h: a
// bad setting, a stray connection), so inside NCCL every topocoll warning is an NCCL WARN.
#pragma once

#include <atomic>

#include "plugin/nccl_api/nccl_common.h"

namespace topocoll::plugin {

void set_nccl_logger(ncclDebugLogger_t logger);
void log_message(ncclDebugLogLevel level, unsigned long subsys, const char* file, int line,
                 const char* fmt, ...) __attribute__((format(printf, 5, 6)));

// The text of the last warning this thread logged since it was cleared ("" if none), kept as
// NCCL keeps its own for ncclGetLastError: the interposer answers with it for a call of its
// own that failed. Fixed storage: logging a warning never allocates.
const char* last_warning_on_this_thread();
void clear_last_warning_on_this_thread();
// Sets that text without logging it: a call refused for a reason already logged once.
void set_last_warning_on_this_thread(const char* text);

}  // namespace topocoll::plugin

#define TC_WARN(fmt, ...) \
  ::topocoll::plugin::log_message(NCCL_LOG_WARN, NCCL_ALL, __FILE__, __LINE__, "topocoll: " fmt, ##__VA_ARGS__)
#define TC_INFO(subsys, fmt, ...) \
  ::topocoll::plugin::log_message(NCCL_LOG_INFO, (subsys), __FILE__, __LINE__, "topocoll: " fmt, ##__VA_ARGS__)
// Logs at most once per call site (decisions, fallbacks, config).
#define TC_ONCE(stmt)                                   \
  do {                                                  \
    static std::atomic<bool> tc_once_done_{false};      \
    if (!tc_once_done_.exchange(true)) { stmt; }        \
  } while (0)
#ifdef TOPOCOLL_ENABLE_TRACE
#define TC_TRACE(subsys, fmt, ...) \
  ::topocoll::plugin::log_message(NCCL_LOG_TRACE, (subsys), __FILE__, __LINE__, "topocoll: " fmt, ##__VA_ARGS__)
#else
#define TC_TRACE(subsys, fmt, ...) do {} while (0)
#endif
