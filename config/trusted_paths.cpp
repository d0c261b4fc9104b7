#include "config/trusted_paths.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>

#include "config/env.h"

namespace topocoll::config {
namespace {

std::deque<std::string> components(const std::string& path) {
  std::deque<std::string> out;
  std::size_t start = 0;
  while (start <= path.size()) {
    const std::size_t end = std::min(path.find('/', start), path.size());
    if (end > start) out.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// ':'-separated entries, empty ones kept (they mean the working directory to a shell).
std::deque<std::string> list_entries(const std::string& list) {
  std::deque<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t end = list.find(':', start);
    out.push_back(list.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return out;
    start = end + 1;
  }
}

std::string mode_text(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", unsigned(mode & 07777));
  return text;
}

// Who may control a directory root writes under: root, this process's user, and under sudo
// the user who ran it (SUDO_UID), who has root already and whose own checkout the README's
// commands write into.
bool trusted_owner(uid_t uid) {
  if (uid == 0 || uid == ::geteuid()) return true;
  if (::geteuid() != 0) return false;
  const std::string& sudo = env().sudo_uid;
  if (sudo.empty() || sudo.size() > 10 || sudo.find_first_not_of("0123456789") != std::string::npos) return false;
  return uid == uid_t(std::stoul(sudo));
}

}  // namespace

std::string unsafe_directory(const std::string& dir, bool sticky_end, const std::string& at_risk) {
  if (dir.empty()) return "no directory named";
  std::string absolute = dir;
  if (dir.front() != '/') {
    char cwd[PATH_MAX];
    if (!::getcwd(cwd, sizeof cwd)) return std::string("cannot learn the working directory: ") + std::strerror(errno);
    absolute = std::string(cwd) + "/" + dir;
  }
  // A resolver of our own, so that every directory the kernel would pass through is looked
  // at: the ones holding a link as much as the link's target (a link in a directory only root
  // controls cannot be swapped; its target's directories are walked in turn).
  std::deque<std::string> rest = components(absolute);
  std::string here = "/";
  int links = 0;
  auto problem = [&](const std::string& path, const struct stat& st, bool last) -> std::string {
    if (!trusted_owner(st.st_uid))
      return path + " belongs to user " + std::to_string(st.st_uid) + ", who could " + at_risk;
    const bool others_write = (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
    const bool sticky = (st.st_mode & S_ISVTX) != 0;
    if (others_write && (!sticky || (last && !sticky_end)))
      return path + " is writable by others (mode " + mode_text(st.st_mode) + "), who could " + at_risk;
    return "";
  };
  struct stat st {};
  if (::lstat("/", &st) != 0) return std::string("cannot inspect /: ") + std::strerror(errno);
  if (std::string why = problem("/", st, rest.empty()); !why.empty()) return why;
  while (!rest.empty()) {
    const std::string piece = rest.front();
    rest.pop_front();
    if (piece == ".") continue;
    if (piece == "..") {  // `here` has no link in it: its parent is its text's
      here = here == "/" ? "/" : here.substr(0, std::max<std::size_t>(1, here.rfind('/')));
      continue;
    }
    const std::string next = (here == "/" ? "" : here) + "/" + piece;
    if (::lstat(next.c_str(), &st) != 0) {
      if (errno == ENOENT) break;  // made later, by whoever writes there
      return "cannot inspect " + next + ": " + std::strerror(errno);
    }
    if (S_ISLNK(st.st_mode)) {
      if (++links > 40) return next + ": too many levels of links";
      char target[PATH_MAX];
      const ssize_t n = ::readlink(next.c_str(), target, sizeof target - 1);
      if (n < 0) return "cannot read the link " + next + ": " + std::strerror(errno);
      const std::string to(target, std::size_t(n));
      std::deque<std::string> spliced = components(to);
      spliced.insert(spliced.end(), rest.begin(), rest.end());
      rest = std::move(spliced);
      if (!to.empty() && to.front() == '/') here = "/";
      continue;
    }
    if (!S_ISDIR(st.st_mode)) break;  // no directory to write under: the writer fails, naming it
    if (std::string why = problem(next, st, rest.empty()); !why.empty()) return why;
    here = next;
  }
  return "";
}

bool writes_as_root() { return ::geteuid() == 0; }

std::string find_executable(const std::string& name, const std::string& search_path) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : "";
  const bool root = writes_as_root();
  for (const std::string& dir : list_entries(search_path)) {
    if (dir.empty() || dir.front() != '/') continue;
    if (root && !unsafe_directory(dir, false, "put another program there").empty()) continue;
    const std::string candidate = dir + "/" + name;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || ::access(candidate.c_str(), X_OK) != 0)
      continue;
    // As root, a program another user may rewrite, or replace in its directory (the file a
    // link in a safe directory points to), is theirs to run as root: not taken.
    if (root && (!trusted_owner(st.st_uid) || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0)) continue;
    if (root) {
      char* real = ::realpath(candidate.c_str(), nullptr);
      if (!real) continue;
      const std::string resolved = real;
      std::free(real);
      if (!unsafe_directory(resolved.substr(0, std::max<std::size_t>(1, resolved.rfind('/'))), false, "replace it")
               .empty())
        continue;
    }
    return candidate;
  }
  return "";
}

}  // namespace topocoll::config
