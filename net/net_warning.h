// Warnings the transport raises without failing a call (a stray connection closed by a
// listener): one sink per process. The default writes to stderr; the NCCL net plugin routes
// them to NCCL's logger.
#pragma once

#include <string>

namespace topocoll::net {

using WarningSink = void (*)(const std::string& message);
void set_warning_sink(WarningSink sink);  // null restores the stderr default
void warn(const std::string& message);

}  // namespace topocoll::net
