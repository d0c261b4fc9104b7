// Warnings that do not fail anything — a bad environment value (config/env.h), a stray
// connection a listener closed (net/) — through one sink per process. The default writes
// "topocoll: WARN <message>" to stderr (the CLI); libnccl-topocoll.so installs NCCL's logger
// in its place (plugin/log.h), so inside NCCL they appear with NCCL's own warnings.
#pragma once

#include <string>

namespace topocoll::config {

using WarningSink = void (*)(const std::string& message);
void set_warning_sink(WarningSink sink);  // null restores the stderr default

// Every time it is called (one per stray connection: each names its peer).
void warn(const std::string& message);
// Only the first time this exact text is warned in the process (a setting, a fallback).
void warn_once(const std::string& message);

}  // namespace topocoll::config
