#include "config/user_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

#include "config/trusted_paths.h"

namespace topocoll::config {
namespace {

std::string in_quotes(const std::string& s) { return "\"" + s + "\""; }

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a pipe";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// As root, a file is written only where no other user can redirect it (config/trusted_paths.h).
void check_root_may_write_in(const std::string& dir, const std::string& what) {
  if (!writes_as_root()) return;
  if (const std::string why = unsafe_directory(dir, true, "redirect what root writes there"); !why.empty())
    throw UserFileError("cannot write " + what + " as root: " + why +
                        " (write it under directories only root or you can change, or trust that user with "
                        "TOPOCOLL_TRUSTED_UIDS)");
}

// The process's umask, read without changing it (umask(2) sets it to read it, which races
// with any other thread creating files).
mode_t current_umask() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("Umask:", 0) == 0) return mode_t(std::strtoul(line.c_str() + 6, nullptr, 8) & 0777);
  return 022;
}

}  // namespace

std::string read_user_file(const std::string& path, std::uint64_t max_bytes, const std::string& what_it_is) {
  struct Closer {
    int fd;
    ~Closer() {
      if (fd >= 0) ::close(fd);
    }
  };
  const auto cannot_read = [&] { return UserFileError("cannot read " + in_quotes(path) + ": " + std::strerror(errno)); };
  // What the name is, looked at before anything opens it: opening a device has effects of its
  // own (a watchdog arms, a tape rewinds, a FIFO blocks), so only a regular file is opened for
  // reading, and it is that very file (reopened through its O_PATH descriptor, which opens
  // the inode looked at, not whatever the name holds by then).
  const Closer at{::open(path.c_str(), O_PATH | O_CLOEXEC)};
  if (at.fd < 0) throw cannot_read();
  struct stat st {};
  if (::fstat(at.fd, &st) != 0) throw cannot_read();
  if (!S_ISREG(st.st_mode))
    throw UserFileError(in_quotes(path) + " is " + file_kind(st.st_mode) + ", not " + what_it_is +
                        " (a regular file is expected)");
  const std::string same_file = "/proc/self/fd/" + std::to_string(at.fd);
  int opened = ::open(same_file.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (opened < 0 && errno == ENOENT) {  // no /proc: by name, then checked to be the same file
    opened = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    struct stat again {};
    if (opened >= 0 && (::fstat(opened, &again) != 0 || again.st_dev != st.st_dev || again.st_ino != st.st_ino)) {
      ::close(opened);
      throw UserFileError(in_quotes(path) + " was replaced while it was read");
    }
  }
  if (opened < 0) throw cannot_read();
  const Closer closer{opened};
  const int fd = opened;
  const auto too_large = [&](const std::string& size) {
    const std::string limit = max_bytes >= (1u << 20) ? std::to_string(max_bytes >> 20) + " MiB"
                                                      : std::to_string(max_bytes) + " bytes";
    return UserFileError(in_quotes(path) + " is " + size + " bytes, more than the " + limit + " " + what_it_is +
                         " may have");
  };
  if (std::uint64_t(st.st_size) > max_bytes) throw too_large(std::to_string(st.st_size));
  std::string text(size_t(st.st_size), '\0');
  size_t got = 0;
  for (;;) {  // the file may grow while read (or /proc-like files report 0): bounded still
    if (got == text.size()) {
      if (text.size() > max_bytes) throw too_large("over " + std::to_string(max_bytes));
      text.resize(size_t(std::min<std::uint64_t>(max_bytes + 1, text.size() + 65536)));
    }
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw UserFileError("cannot read " + in_quotes(path) + ": " + std::strerror(errno));
    if (n == 0) break;
    got += size_t(n);
  }
  text.resize(got);
  return text;
}

void check_replaceable(const std::string& path) {
  // Only a file (or a link, which is replaced, not followed) is replaced: as root a rename
  // would as readily put a file where /dev/null or a pipe another program reads from was.
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
    throw UserFileError("cannot write " + in_quotes(path) + ": it is " + file_kind(st.st_mode) +
                        ", and only a regular file is replaced");
  const std::string dir = parent_directory(path);
  if (::stat(dir.c_str(), &st) != 0)
    throw UserFileError("cannot write " + in_quotes(path) + ": " + in_quotes(dir) + ": " + std::strerror(errno));
  if (!S_ISDIR(st.st_mode)) throw UserFileError("cannot write " + in_quotes(path) + ": " + in_quotes(dir) + " is not a directory");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw UserFileError("cannot write " + in_quotes(path) + ": " + in_quotes(dir) + ": " + std::strerror(errno));
  check_root_may_write_in(dir, in_quotes(path));
}

void replace_file(const std::string& path, const std::string& text) {
  check_replaceable(path);
  // A file replaced keeps its mode and owner (a 0600 file stays private); a new one gets
  // what the umask leaves of 0666, as a file opened for writing would.
  // Not one another user planted in a shared directory (/tmp) for root to write: that one's
  // mode and owner would make root's output theirs. No set-id bit is ever kept.
  struct stat old {};
  const bool replacing = ::lstat(path.c_str(), &old) == 0 && S_ISREG(old.st_mode) && trusted_owner(old.st_uid);
  const mode_t mode = replacing ? old.st_mode & 0777 : 0666 & ~current_umask();
  // A short name: the file's own name may already be as long as a name may be.
  const std::string dir = parent_directory(path);
  std::string temporary = dir + "/.topocoll-XXXXXX";
  const int fd = ::mkostemp(temporary.data(), O_CLOEXEC);
  if (fd < 0) throw UserFileError("cannot create a file beside " + path + ": " + std::strerror(errno));
  bool ok = ::fchmod(fd, mode) == 0;
  if (ok && replacing && writes_as_root() && (old.st_uid != 0 || old.st_gid != 0))
    ok = ::fchown(fd, old.st_uid, old.st_gid) == 0;
  for (size_t done = 0; ok && done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += size_t(n);
    else if (n == 0) errno = EIO;
  }
  // On disk before it takes the name: after a crash the name holds the old text or the new,
  // never an empty file (ext4 and XFS may write a renamed file's data later).
  if (ok) ok = ::fsync(fd) == 0;
  int error = errno;
  // A full disk or a network file system may only say so at close.
  if (::close(fd) != 0 && ok) {
    ok = false;
    error = errno;
  }
  if (!ok || ::rename(temporary.c_str(), path.c_str()) != 0) {
    const int why = ok ? errno : error;
    ::unlink(temporary.c_str());
    throw UserFileError("cannot write " + path + ": " + std::strerror(why));
  }
  // The rename itself made durable (best effort: some file systems refuse fsync on a directory).
  if (const int d = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); d >= 0) {
    ::fsync(d);
    ::close(d);
  }
}

void prepare_output_dir(const std::string& dir) {
  if (dir.empty()) throw UserFileError("the output directory is empty");
  check_root_may_write_in(dir, "into " + in_quotes(dir));  // before any directory is made
  std::vector<std::string> pieces;
  for (std::size_t start = 0; start <= dir.size();) {
    const std::size_t end = std::min(dir.find('/', start), dir.size());
    if (std::string piece = dir.substr(start, end - start); !piece.empty() && piece != ".") pieces.push_back(piece);
    start = end + 1;
  }
  // What exists already was looked at above, links as the kernel resolves them. What is made
  // here is made and entered by descriptor, never by name again, and never through a link: a
  // name another user puts in its place meanwhile (a link to /etc under /tmp) is refused,
  // not followed into making root's directory elsewhere.
  std::string existing = dir.front() == '/' ? "/" : ".";
  std::size_t made_from = 0;
  for (; made_from < pieces.size(); ++made_from) {
    const std::string next = (existing == "/" ? "/" : existing + "/") + pieces[made_from];
    struct stat st {};
    if (::stat(next.c_str(), &st) != 0) break;
    if (!S_ISDIR(st.st_mode)) throw UserFileError("cannot create " + dir + ": " + next + " is not a directory");
    existing = next;
  }
  int at = ::open(existing.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (at < 0) throw UserFileError("cannot create " + dir + ": " + existing + ": " + std::strerror(errno));
  std::string partial = existing;
  for (std::size_t i = made_from; i < pieces.size(); ++i) {
    partial += (partial == "/" ? "" : "/") + pieces[i];
    if (::mkdirat(at, pieces[i].c_str(), 0755) != 0 && errno != EEXIST) {
      const int err = errno;
      ::close(at);
      throw UserFileError("cannot create " + partial + ": " + std::strerror(err));
    }
    const int next = ::openat(at, pieces[i].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    const int err = errno;
    ::close(at);
    if (next < 0)
      throw UserFileError("cannot create " + dir + ": " + partial +
                          (err == ELOOP || err == ENOTDIR ? " is not a directory (a link or a file took its place)"
                                                          : std::string(": ") + std::strerror(err)));
    at = next;
  }
  ::close(at);
  check_root_may_write_in(dir, "into " + in_quotes(dir));
  // A fresh file of a unique name (O_EXCL): a link planted at a guessable name is never
  // followed, nothing outside the directory is created or truncated.
  std::string probe = dir + "/.topocoll-write-check.XXXXXX";
  const int fd = ::mkostemp(probe.data(), O_CLOEXEC);
  if (fd < 0) throw UserFileError("cannot create a file in " + dir + ": " + std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

}  // namespace topocoll::config
