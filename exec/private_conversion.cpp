#include "exec/private_conversion.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "config/env.h"
#include "config/trusted_paths.h"
#include "config/user_files.h"
#include "exec/external_program.h"

namespace topocoll::exec {
namespace {

// A picture larger than this is not one a converter of ours should have made.
constexpr std::uint64_t kMaxOutputBytes = 256ull << 20;

std::string substitute(const std::string& arg, const std::string& in, const std::string& out) {
  if (arg == "{in}") return in;
  if (arg == "{out}") return out;
  return arg;
}

// Where the private directory goes: TMPDIR when it is an absolute path and, as root, one no
// other user controls (a per-job TMPDIR of another user's would let them swap our directory
// for a link of theirs between mkdtemp and the converter's write); /tmp otherwise.
std::string scratch_base() {
  const std::string& base = config::env().tmpdir;
  if (base.empty() || base.front() != '/') return "/tmp";
  if (config::writes_as_root() && !config::unsafe_directory(base, true, "swap the directory").empty()) return "/tmp";
  return base;
}

// The conversion itself, in `scratch`: sets `interrupt` to the run that the terminal's
// interrupt ended, so no further alternative starts and the caller passes it on.
Conversion convert_in(const std::string& scratch, const std::string& input, const std::string& in_ext,
                      const std::string& out_ext, const std::vector<std::vector<std::string>>& alternatives,
                      const std::string& what, bool show_errors, ProgramRun& interrupt) {
  Conversion result;
  const std::string in = scratch + "/in." + in_ext, out = scratch + "/out." + out_ext;
  try {
    config::replace_file(in, input);
    std::string last;
    for (const auto& command : alternatives) {
      std::vector<std::string> argv;
      for (const auto& arg : command) argv.push_back(substitute(arg, in, out));
      const ProgramRun run = run_program(argv, !show_errors);
      if (run.interrupted()) {
        interrupt = run;
        result.failure = what + " interrupted (" + argv.front() + ": " + describe_end(run) + ")";
        return result;
      }
      if (run.succeeded()) {
        last = argv.front() + " wrote nothing";
        try {
          if (::access(out.c_str(), F_OK) == 0)
            result.output = config::read_user_file(out, kMaxOutputBytes, "a converted picture");
        } catch (const config::UserFileError& e) {
          last = argv.front() + ": " + e.what();
        }
        if (!result.output.empty()) break;
      } else {
        last = argv.front() + ": " + describe_end(run);
      }
      ::unlink(out.c_str());
    }
    if (result.output.empty()) result.failure = what + " failed (" + last + ")";
  } catch (const config::UserFileError& e) {
    result.output.clear();
    result.failure = e.what();
  }
  return result;
}

}  // namespace

Conversion convert_privately(const std::string& input, const std::string& in_ext, const std::string& out_ext,
                             const std::vector<std::vector<std::string>>& alternatives, const std::string& what,
                             bool show_errors) {
  if (alternatives.empty()) throw std::invalid_argument("convert_privately: no converter given");
  std::string scratch = scratch_base() + "/topocoll-convert.XXXXXX";
  if (!::mkdtemp(scratch.data()))
    return Conversion{.output = {}, .failure = "no directory to convert in (" + scratch + ": " + std::strerror(errno) + ")"};
  // Everything in it goes on every way out, also what a converter wrote besides its output
  // (ImageMagick's out-0.png, out-1.png for a picture of several frames), exceptions included;
  // a Ctrl-C while a converter runs is passed on only once the directory is gone.
  ProgramRun interrupt;
  Conversion result;
  {
    struct Remover {
      std::string dir;
      ~Remover() {
        std::error_code ignored;
        std::filesystem::remove_all(dir, ignored);
      }
    } remover{scratch};
    result = convert_in(scratch, input, in_ext, out_ext, alternatives, what, show_errors, interrupt);
  }
  pass_on_interrupt(interrupt);
  return result;
}

}  // namespace topocoll::exec
