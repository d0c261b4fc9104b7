#include "config/replace_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace topocoll::config {

void replace_file(const std::string& path, const std::string& text) {
  std::string temporary = path + ".tmp.XXXXXX";
  const int fd = ::mkostemp(temporary.data(), O_CLOEXEC);
  if (fd < 0) throw ReplaceFileError("cannot create a file beside " + path + ": " + std::strerror(errno));
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
    throw ReplaceFileError("cannot write " + path + ": " + std::strerror(why));
  }
}

}  // namespace topocoll::config
