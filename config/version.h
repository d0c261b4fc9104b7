// Which topocoll this is: the project's version (CMakeLists.txt's project()), the one string the
// CLI (`topocoll --version`), the library's log and its exported version symbol all print.
#pragma once

namespace topocoll::config {

// "0.1.0": the version this build was configured with.
const char* version();

}  // namespace topocoll::config
