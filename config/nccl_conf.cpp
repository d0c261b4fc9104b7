#include "config/nccl_conf.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>

#include "config/user_files.h"
#include "config/warnings.h"

namespace topocoll::config {

std::vector<std::string> nccl_conf_paths(const std::optional<std::string>& conf_file,
                                         const std::optional<std::string>& home) {
  std::vector<std::string> paths;
  if (conf_file && !conf_file->empty()) paths.push_back(*conf_file);
  else if (home) paths.push_back(*home + "/.nccl.conf");
  paths.push_back("/etc/nccl.conf");
  return paths;
}

void add_nccl_conf(std::istream& file, NcclConf& into) {
  std::string line;
  while (std::getline(file, line)) {
    if (line.empty() || line.front() == '#') continue;
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    // NCCL copies at most 1023 bytes of name and of value.
    into.try_emplace(line.substr(0, std::min<std::size_t>(eq, 1023)), line.substr(eq + 1, 1023));
  }
}

NcclConf read_nccl_conf(const std::vector<std::string>& paths) {
  NcclConf conf;
  for (const std::string& path : paths) {
    if (::access(path.c_str(), F_OK) != 0) continue;  // absent: NCCL skips it silently
    try {
      std::istringstream file(read_user_file(path, kMaxNcclConfBytes, "an NCCL configuration file"));
      add_nccl_conf(file, conf);
    } catch (const UserFileError& e) {
      // A pipe would block this process (inside NCCL's init, under LD_PRELOAD) forever.
      warn_once(std::string(e.what()) + ": its settings are not read");
    }
  }
  return conf;
}

const NcclConf& process_nccl_conf() {
  static const NcclConf conf = [] {
    std::optional<std::string> conf_file, home;
    if (const char* f = std::getenv("NCCL_CONF_FILE")) conf_file = f;
    // As NCCL: the real user's home from the password database, not $HOME; the reentrant
    // call, as NCCL may look it up on another thread meanwhile.
    if (!conf_file || conf_file->empty()) {
      passwd entry{};
      passwd* found = nullptr;
      std::vector<char> buffer(16384);
      if (::getpwuid_r(::getuid(), &entry, buffer.data(), buffer.size(), &found) == 0 && found && found->pw_dir)
        home = found->pw_dir;
    }
    return read_nccl_conf(nccl_conf_paths(conf_file, home));
  }();
  return conf;
}

}  // namespace topocoll::config
