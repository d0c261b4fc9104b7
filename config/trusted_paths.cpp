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
#include <string>

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

// A uid as a variable gives it: digits only, below (uid_t)-1; none otherwise.
bool parse_uid(const std::string& text, uid_t* uid) {
  if (text.empty() || text.size() > 10 || text.find_first_not_of("0123456789") != std::string::npos) return false;
  const unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
  if (v >= 0xffffffffull) return false;
  *uid = uid_t(v);
  return true;
}

// Who may control a directory root writes under: root, this process's user, under sudo the
// user who ran it (SUDO_UID), who has root already and whose own checkout the README's
// commands write into, and the users TOPOCOLL_TRUSTED_UIDS names (as git's safe.directory:
// a container's root writing into a checkout mounted from the host). Programs root runs
// come only from root's or this user's directories: a sudoers rule that lets a user run
// topocoll alone must not let their PATH choose what else runs as root.
bool trusted_owner(uid_t uid, bool for_programs) {
  if (uid == 0 || uid == ::geteuid()) return true;
  if (::geteuid() != 0 || for_programs) return false;
  uid_t sudo = 0;
  if (parse_uid(env().sudo_uid, &sudo) && uid == sudo) return true;
  const std::string& list = env().trusted_uids;
  std::size_t start = 0;
  while (start < list.size()) {
    const std::size_t end = std::min(list.find(',', start), list.size());
    uid_t listed = 0;
    if (parse_uid(list.substr(start, end - start), &listed) && listed == uid) return true;
    start = end + 1;
  }
  return false;
}

std::string unsafe_directory_for(const std::string& dir, bool sticky_end, const std::string& at_risk,
                                 bool for_programs) {
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
  struct stat here_st {};
  int links = 0;
  int missing = 0;  // components below `here` that do not exist yet: made later, by the writer
  auto problem = [&](const std::string& path, const struct stat& st, bool last) -> std::string {
    if (!trusted_owner(st.st_uid, for_programs))
      return path + " belongs to user " + std::to_string(st.st_uid) + ", who could " + at_risk;
    const bool others_write = (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
    const bool sticky = (st.st_mode & S_ISVTX) != 0;
    if (others_write && (!sticky || (last && !sticky_end)))
      return path + " is writable by others (mode " + mode_text(st.st_mode) + "), who could " + at_risk;
    return "";
  };
  if (::lstat("/", &here_st) != 0) return std::string("cannot inspect /: ") + std::strerror(errno);
  if (std::string why = problem("/", here_st, rest.empty()); !why.empty()) return why;
  bool ended_in_a_directory = true;  // false: a missing component or a file ended the walk
  while (!rest.empty()) {
    const std::string piece = rest.front();
    rest.pop_front();
    if (piece == ".") continue;
    if (missing > 0) {  // below a directory still to be made: only ".." leads back out
      missing += piece == ".." ? -1 : 1;
      continue;
    }
    if (piece == "..") {  // `here` has no link in it: its parent is its text's
      here = parent_directory(here);
      if (::lstat(here.c_str(), &here_st) != 0) return "cannot inspect " + here + ": " + std::strerror(errno);
      continue;
    }
    const std::string next = (here == "/" ? "" : here) + "/" + piece;
    struct stat st {};
    if (::lstat(next.c_str(), &st) != 0) {
      if (errno != ENOENT) return "cannot inspect " + next + ": " + std::strerror(errno);
      missing = 1;
      continue;
    }
    if (S_ISLNK(st.st_mode)) {
      // In a sticky directory others write to (/tmp), anyone may plant a link and point it
      // elsewhere later: only one of a trusted user's, or of the directory's owner, is followed
      // (the kernel's protected_symlinks rule, applied whatever the kernel is set to).
      const bool shared = (here_st.st_mode & S_ISVTX) && (here_st.st_mode & (S_IWGRP | S_IWOTH));
      if (shared && !trusted_owner(st.st_uid, for_programs) && st.st_uid != here_st.st_uid)
        return next + " is a link of user " + std::to_string(st.st_uid) + " in the shared directory " + here +
               ", who could " + at_risk;
      if (++links > 40) return next + ": too many levels of links";
      char target[PATH_MAX];
      const ssize_t n = ::readlink(next.c_str(), target, sizeof target - 1);
      if (n < 0) return "cannot read the link " + next + ": " + std::strerror(errno);
      const std::string to(target, std::size_t(n));
      std::deque<std::string> spliced = components(to);
      spliced.insert(spliced.end(), rest.begin(), rest.end());
      rest = std::move(spliced);
      if (!to.empty() && to.front() == '/') {
        here = "/";
        if (::lstat("/", &here_st) != 0) return std::string("cannot inspect /: ") + std::strerror(errno);
      }
      continue;
    }
    if (!S_ISDIR(st.st_mode)) {  // no directory to write under: the writer fails, naming it
      ended_in_a_directory = false;
      break;
    }
    if (std::string why = problem(next, st, false); !why.empty()) return why;
    here = next;
    here_st = st;
  }
  // The directory the path ends in is judged as the last one ("/tmp/." is /tmp).
  if (ended_in_a_directory && missing == 0)
    if (std::string why = problem(here, here_st, true); !why.empty()) return why;
  return "";
}

}  // namespace

std::string unsafe_directory(const std::string& dir, bool sticky_end, const std::string& at_risk) {
  return unsafe_directory_for(dir, sticky_end, at_risk, false);
}

bool trusted_owner(uid_t uid) { return trusted_owner(uid, false); }

bool trusted_program_directory(const std::string& dir) {
  return unsafe_directory_for(dir, false, "put another program there", true).empty();
}

bool writes_as_root() { return ::geteuid() == 0; }

std::string trusted_program(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || ::access(path.c_str(), X_OK) != 0) return "";
  if (!writes_as_root()) return path;
  // As root: the file itself as it resolves, in a directory (links walked) that only root or
  // this user controls, and not writable by another: else it is theirs to run as root.
  char* real = ::realpath(path.c_str(), nullptr);
  if (!real) return "";
  const std::string resolved = real;
  std::free(real);
  if (!trusted_owner(st.st_uid, true) || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) return "";
  const std::string dir = parent_directory(resolved);
  if (!unsafe_directory_for(dir, false, "replace it", true).empty()) return "";
  return resolved;
}

std::string parent_directory(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

std::string find_executable(const std::string& name, const std::string& search_path) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : "";
  const bool root = writes_as_root();
  for (const std::string& dir : list_entries(search_path)) {
    if (dir.empty() || dir.front() != '/') continue;
    if (root && !unsafe_directory_for(dir, false, "put another program there", true).empty()) continue;
    if (std::string program = trusted_program(dir + "/" + name); !program.empty()) return program;
  }
  return "";
}

}  // namespace topocoll::config
