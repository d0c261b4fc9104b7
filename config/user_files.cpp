#include "config/user_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

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

}  // namespace

std::string read_user_file(const std::string& path, std::uint64_t max_bytes, const std::string& what_it_is) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw UserFileError("cannot read " + in_quotes(path) + ": " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw UserFileError("cannot read " + in_quotes(path) + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    throw UserFileError(in_quotes(path) + " is " + file_kind(st.st_mode) + ", not " + what_it_is +
                        " (a regular file is expected)");
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

void replace_file(const std::string& path, const std::string& text) {
  std::string temporary = path + ".tmp.XXXXXX";
  const int fd = ::mkostemp(temporary.data(), O_CLOEXEC);
  if (fd < 0) throw UserFileError("cannot create a file beside " + path + ": " + std::strerror(errno));
  bool ok = ::fchmod(fd, 0644) == 0;
  for (size_t done = 0; ok && done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += size_t(n);
    else if (n == 0) errno = EIO;
  }
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
}

}  // namespace topocoll::config
