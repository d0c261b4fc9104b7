// Running a converter that writes its output by name (Graphviz's `dot`, rsvg-convert,
// ImageMagick's `convert`) without letting it write through a link planted at that name:
// topocoll often runs as root on paths others may control. The converter works in a
// directory of our own (mkdtemp, 0700: no one else may rename or replace what is in it) under
// TMPDIR, or as root under /tmp when another user controls TMPDIR (config/trusted_paths.h);
// its output is read back and put in place by the caller with config::replace_file like
// every other file topocoll writes. The directory and all in it are removed on return.
#pragma once

#include <string>
#include <vector>

namespace topocoll::exec {

struct Conversion {
  std::string output;   // what the converter wrote; empty when `failure` says why
  std::string failure;  // why nothing came out (no directory, no converter, its exit status)
  bool succeeded() const { return failure.empty(); }
};

// Writes `input` to <scratch>/in.<in_ext>, then runs each command line of `alternatives` in
// turn until one exits 0 and wrote <scratch>/out.<out_ext>; in every argument the words
// "{in}" and "{out}" become those paths. The scratch directory is gone on return; a
// converter ended by Ctrl-C (exec/external_program.h) ends us the same way once it is gone.
// `what` names the converters for the failure text ("Graphviz's dot"). `show_errors`: the
// converters' own output goes to our stderr (a single converter the user asked for, whose
// syntax or layout errors they need), else to /dev/null (alternatives tried in turn).
Conversion convert_privately(const std::string& input, const std::string& in_ext, const std::string& out_ext,
                             const std::vector<std::vector<std::string>>& alternatives, const std::string& what,
                             bool show_errors = false);

}  // namespace topocoll::exec
