#include "exec/private_conversion.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

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

}  // namespace

Conversion convert_privately(const std::string& input, const std::string& in_ext, const std::string& out_ext,
                             const std::vector<std::vector<std::string>>& alternatives, const std::string& what) {
  if (alternatives.empty()) throw std::invalid_argument("convert_privately: no converter given");
  const char* base = std::getenv("TMPDIR");
  std::string scratch = std::string(base && *base == '/' ? base : "/tmp") + "/topocoll-convert.XXXXXX";
  Conversion result;
  if (!::mkdtemp(scratch.data())) {
    result.failure = "no directory to convert in (" + scratch + ": " + std::strerror(errno) + ")";
    return result;
  }
  const std::string in = scratch + "/in." + in_ext, out = scratch + "/out." + out_ext;
  try {
    config::replace_file(in, input);
    std::string last;
    for (const auto& command : alternatives) {
      std::vector<std::string> argv;
      for (const auto& arg : command) argv.push_back(substitute(arg, in, out));
      const ProgramRun run = run_program(argv);
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
        last = argv.front() + ": " + (run.started ? "exit " + std::to_string(run.exit_code) : run.error);
      }
      ::unlink(out.c_str());
    }
    if (result.output.empty()) result.failure = what + " failed (" + last + ")";
  } catch (const config::UserFileError& e) {
    result.output.clear();
    result.failure = e.what();
  }
  ::unlink(in.c_str());
  ::unlink(out.c_str());
  ::rmdir(scratch.c_str());
  return result;
}

}  // namespace topocoll::exec
