#include "config/version.h"

namespace topocoll::config {

const char* version() { return TOPOCOLL_VERSION; }

}  // namespace topocoll::config
