#include "fabric/iproute2.h"

#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "config/env.h"
#include "config/trusted_paths.h"

namespace topocoll::fabric {
namespace {

std::vector<std::string> split_path(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = text.find(':', start);
    std::string dir = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!dir.empty()) out.push_back(std::move(dir));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

std::string without_trailing_slash(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

std::string parent_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos || slash == 0 ? "" : path.substr(0, slash);
}

std::string base_of(const std::string& path) { return path.substr(path.rfind('/') + 1); }

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// An unpacked .deb keeps its absolute links (Debian's sbin/ip -> /bin/ip): inside a prefix
// they mean the prefix's own file, not the machine's.
std::string inside_prefix(const std::string& prefix, const std::string& candidate) {
  char target[4096];
  const ssize_t n = ::readlink(candidate.c_str(), target, sizeof target - 1);
  if (n <= 0 || target[0] != '/') return candidate;
  return prefix + std::string(target, size_t(n));
}

// The prefix a tool's directory belongs to: /p for /p/sbin, /p/bin, /p/usr/sbin, /p/usr/bin.
std::string prefix_of_dir(const std::string& dir) {
  std::string prefix = dir;
  if (const std::string b = base_of(prefix); b == "sbin" || b == "bin") prefix = parent_of(prefix);
  if (base_of(prefix) == "usr") prefix = parent_of(prefix);
  return prefix;
}

// The library directories of a prefix that exist; none for the system's own prefixes.
std::string library_path_of(const std::string& prefix, const std::string& triplet) {
  if (prefix.empty() || prefix == "/usr/local") return "";
  std::string out;
  for (const char* sub : {"/usr/lib/", "/lib/"}) {
    const std::string dir = prefix + sub + triplet;
    // As root, no library directory another user controls (they would choose the code `ip` runs).
    if (!triplet.empty() && is_directory(dir) && (!config::writes_as_root() || config::trusted_program_directory(dir)))
      out += (out.empty() ? "" : ":") + dir;
  }
  return out;
}

// `name` in a directory given as a prefix or as the tool's own directory.
std::optional<ToolLocation> find_in_prefix(const std::string& name, const std::string& given,
                                           const std::string& triplet) {
  const std::string root = without_trailing_slash(given);
  for (const char* sub : {"", "/sbin", "/bin", "/usr/sbin", "/usr/bin"}) {
    const std::string dir = root + sub;
    const std::string candidate = inside_prefix(root, dir + "/" + name);
    if (!is_executable_file(candidate)) continue;
    // As root, only a file no other user can replace, as PATH's (config/trusted_paths.h): the
    // setting and the bundled prefix name a program root runs as surely as PATH does.
    const std::string program = config::trusted_program(candidate);
    if (program.empty()) continue;
    // Libraries: those of the prefix the tool sits in (the given directory may be its bin).
    const std::string prefix = *sub ? root : prefix_of_dir(root);
    return ToolLocation{program, library_path_of(prefix.empty() ? root : prefix, triplet)};
  }
  return std::nullopt;
}

// The directory a PATH entry names, resolved, when it may supply the tools a root process
// runs: absolute (a relative entry means whatever the current directory holds), and no
// directory on its path, links followed, controlled by another user
// (config/trusted_paths.h), so no other user's `ip` runs as root.
std::optional<std::string> trusted_path_dir(const std::string& dir) {
  if (dir.empty() || dir[0] != '/') return std::nullopt;
  if (!config::trusted_program_directory(dir)) return std::nullopt;
  char* real = ::realpath(dir.c_str(), nullptr);
  if (!real) return std::nullopt;
  const std::string resolved = real;
  std::free(real);
  return resolved;
}

std::string joined(const std::vector<std::string>& items, const std::string& separator) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : separator) + i;
  return out;
}

}  // namespace

ToolSearch iproute2_search() {
  ToolSearch s;
  const config::Env& e = config::env();
  s.setting = e.fabric_iproute2;
  s.path = split_path(e.path);
  s.system_dirs = {"/usr/sbin", "/sbin", "/usr/bin", "/bin"};
  char exe[4096];
  if (const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1); n > 0) {
    // build/tools/topocoll -> build/deps
    const std::string build = parent_of(parent_of(std::string(exe, size_t(n))));
    if (!build.empty()) s.bundled_prefix = build + "/deps";
  }
  utsname u {};
  if (::uname(&u) == 0) s.library_triplet = std::string(u.machine) + "-linux-gnu";
  return s;
}

std::optional<ToolLocation> find_tool(const std::string& name, const ToolSearch& s) {
  if (!s.setting.empty()) return find_in_prefix(name, s.setting, s.library_triplet);
  std::vector<std::string> dirs;
  for (const auto& d : s.path)
    if (const std::optional<std::string> resolved = trusted_path_dir(d)) dirs.push_back(*resolved);
  dirs.insert(dirs.end(), s.system_dirs.begin(), s.system_dirs.end());
  for (const auto& d : dirs) {
    const std::string dir = without_trailing_slash(d);
    // As root, only a file no other user can replace (config/trusted_paths.h), as resolved.
    if (const std::string program = config::trusted_program(dir + "/" + name); !program.empty())
      return ToolLocation{program, library_path_of(prefix_of_dir(dir), s.library_triplet)};
  }
  if (!s.bundled_prefix.empty()) return find_in_prefix(name, s.bundled_prefix, s.library_triplet);
  return std::nullopt;
}

std::string tool_missing(const std::string& name, const ToolSearch& s) {
  const std::string provide =
      "install iproute2 (apt-get install iproute2), or unpack the .debs of iproute2 and its libraries "
      "(perf/gpu/fetch_debs.sh downloads them where apt works) with `dpkg -x DEB DIR` and set "
      "TOPOCOLL_FABRIC_IPROUTE2=DIR";
  if (!s.setting.empty())
    return "`" + name + "` (iproute2) is not in TOPOCOLL_FABRIC_IPROUTE2=" + s.setting + " (looked in " +
           joined({s.setting, s.setting + "/sbin", s.setting + "/bin", s.setting + "/usr/sbin",
                   s.setting + "/usr/bin"},
                  ", ") +
           "): point it at a directory holding `" + name + "` or at a prefix an iproute2 .deb was unpacked into" +
           (config::writes_as_root() ? " (as root: a file no other user may replace, in directories no other user "
                                       "controls)"
                                     : "");
  std::vector<std::string> places;
  std::vector<std::string> skipped;
  for (const auto& d : s.path)
    if (!trusted_path_dir(d)) skipped.push_back(d);
  places.push_back(s.path.empty() ? "PATH (empty)"
                                  : "PATH (" + joined(s.path, ":") + ")" +
                                        (skipped.empty() ? ""
                                                         : " but not its relative, missing or writable-by-others "
                                                           "entries " + joined(skipped, ", ")));
  places.push_back(joined(s.system_dirs, ", "));
  if (!s.bundled_prefix.empty()) places.push_back(s.bundled_prefix + " (.debs unpacked beside this build)");
  return "`" + name + "` (iproute2) is not installed: looked in " + joined(places, ", ") +
         " and TOPOCOLL_FABRIC_IPROUTE2 is unset; " + provide;
}

const std::optional<ToolLocation>& iproute2_tool(const std::string& name) {
  static std::mutex mutex;
  static std::map<std::string, std::optional<ToolLocation>> found;
  std::lock_guard lock(mutex);
  auto it = found.find(name);
  if (it == found.end()) it = found.emplace(name, find_tool(name, iproute2_search())).first;
  return it->second;
}

}  // namespace topocoll::fabric
