#include "accept/report_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "exec/external_program.h"

namespace topocoll::accept {
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path, int error) {
  throw ReportError("cannot " + what + " " + path + ": " + std::strerror(error));
}

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

void write_file(const std::string& path, const std::string& contents) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("create", path, errno);
  std::size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : EIO;
      ::close(fd);
      fail("write", path, error);
    }
    done += std::size_t(n);
  }
  // A full disk or a network file system may only say so now.
  if (::close(fd) != 0) fail("write", path, errno);
}

}  // namespace

void prepare_report_dir(const std::string& dir) {
  if (dir.empty()) throw ReportError("the report directory is empty");
  std::string partial = dir.front() == '/' ? "" : ".";
  std::size_t start = 0;
  while (start <= dir.size()) {
    const std::size_t end = std::min(dir.find('/', start), dir.size());
    const std::string piece = dir.substr(start, end - start);
    start = end + 1;
    if (piece.empty() || piece == ".") continue;
    partial += "/" + piece;
    if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) fail("create", partial, errno);
    if (!is_directory(partial)) throw ReportError("cannot create " + dir + ": " + partial + " is not a directory");
  }
  const std::string probe = dir + "/.topocoll-write-check." + std::to_string(::getpid());
  write_file(probe, "");
  ::unlink(probe.c_str());
}

WrittenReport write_report_files(const std::string& dir, const std::string& json,
                                 const std::string& text, const std::string& dot) {
  prepare_report_dir(dir);
  write_file(dir + "/report.json", json);
  write_file(dir + "/report.txt", text);
  const std::string dot_path = dir + "/topology.dot", png_path = dir + "/topology.png";
  write_file(dot_path, dot);
  WrittenReport written;
  const exec::ProgramRun run = exec::run_program(
      {"dot", "-Tpng", "-o", exec::path_argument(png_path), exec::path_argument(dot_path)});
  written.drawn = run.succeeded();
  if (!written.drawn)
    written.not_drawn = run.started ? "Graphviz's dot failed (exit " + std::to_string(run.exit_code) + ")"
                                    : "no Graphviz for the PNG (" + run.error + ")";
  return written;
}

}  // namespace topocoll::accept
