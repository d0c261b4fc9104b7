// The one way topocoll writes a file a user reads (reports, hostfiles, fabric records), often
// as root and into directories others may write: whole or not at all, and never through a
// link someone planted at the path.
#pragma once

#include <stdexcept>
#include <string>

namespace topocoll::config {

struct ReplaceFileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// `text` as `path` (mode 0644): a fresh file of a unique name beside it (O_EXCL), written
// to the last byte and renamed over `path` (rename replaces a link, never follows it). On
// failure nothing is left beside `path` and `path` is as it was; the error names the path.
void replace_file(const std::string& path, const std::string& text);

}  // namespace topocoll::config
