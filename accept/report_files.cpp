#include "accept/report_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include "config/user_files.h"
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
  try {
    config::replace_file(path, contents);
  } catch (const config::UserFileError& e) {
    throw ReportError(e.what());
  }
}

// Graphviz writes its PNG by name, through any link at that name: it draws in a directory
// of our own under the sticky temporary directory (no one else may rename or replace what is
// in it), and the picture is then put in place like every other report file.
std::string draw_png(const std::string& dot, std::string* not_drawn) {
  const char* base = std::getenv("TMPDIR");
  std::string scratch = std::string(base && *base == '/' ? base : "/tmp") + "/topocoll-dot.XXXXXX";
  if (!::mkdtemp(scratch.data())) {
    *not_drawn = "no directory to draw in (" + scratch + ": " + std::strerror(errno) + ")";
    return "";
  }
  const std::string in = scratch + "/topology.dot", out = scratch + "/topology.png";
  std::string png;
  try {
    config::replace_file(in, dot);
    const exec::ProgramRun run = exec::run_program({"dot", "-Tpng", "-o", out, in});
    if (run.succeeded()) {
      std::ifstream f(out, std::ios::binary);
      png.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
      if (png.empty()) *not_drawn = "Graphviz's dot wrote no picture";
    } else {
      *not_drawn = run.started ? "Graphviz's dot failed (exit " + std::to_string(run.exit_code) + ")"
                               : "no Graphviz for the PNG (" + run.error + ")";
    }
  } catch (const config::UserFileError& e) {
    *not_drawn = e.what();
  }
  ::unlink(in.c_str());
  ::unlink(out.c_str());
  ::rmdir(scratch.c_str());
  return png;
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
  // A fresh file of a unique name (O_EXCL): a link planted at a guessable name is never
  // followed, nothing outside the directory is created or truncated.
  std::string probe = dir + "/.topocoll-write-check.XXXXXX";
  const int fd = ::mkostemp(probe.data(), O_CLOEXEC);
  if (fd < 0) fail("create a file in", dir, errno);
  ::close(fd);
  ::unlink(probe.c_str());
}

WrittenReport write_report_files(const std::string& dir, const std::string& json,
                                 const std::string& text, const std::string& dot) {
  prepare_report_dir(dir);
  write_file(dir + "/report.json", json);
  write_file(dir + "/report.txt", text);
  write_file(dir + "/topology.dot", dot);
  WrittenReport written;
  const std::string png = draw_png(dot, &written.not_drawn);
  written.drawn = !png.empty();
  if (written.drawn) write_file(dir + "/topology.png", png);
  return written;
}

}  // namespace topocoll::accept
