// A name from a file users hand us (a topology's "name") as a file name inside a directory
// we write: a name may hold '/' and "..", which would write elsewhere.
#pragma once

#include <cctype>
#include <string>

namespace topocoll::cli {

// Every character but letters, digits, '-', '_' and '.' becomes '_', and a leading '.' too
// (no hidden file, no ".."); an empty name is "topology".
inline std::string file_stem(const std::string& name) {
  std::string out = name.empty() ? "topology" : name;
  for (char& c : out)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  if (out.front() == '.') out.front() = '_';
  return out;
}

}  // namespace topocoll::cli
