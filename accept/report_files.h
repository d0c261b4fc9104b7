// The acceptance report on disk (docs/acceptance.md): report.json, report.txt, topology.dot
// and, where Graphviz is installed, topology.png, in a directory created with every missing
// parent. Every open, write and close is checked: a report that cannot be written is an
// error naming the file and why, never a line saying it was written. Each file is replaced
// whole, never written through a link planted at its name (config/user_files.h): this
// runs as root, into directories such as /shared/accept that others may write.
#pragma once

#include <stdexcept>
#include <string>

namespace topocoll::accept {

class ReportError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// config::prepare_output_dir, its failure a ReportError: run before a long run, so an
// unwritable --report fails at once rather than after the budget.
void prepare_report_dir(const std::string& dir);

struct WrittenReport {
  bool drawn = false;     // topology.png written
  std::string not_drawn;  // why not (Graphviz missing, or dot failed)
};

// Writes the report's files into `dir` (prepared here too). Throws ReportError on the first
// file that cannot be written whole.
WrittenReport write_report_files(const std::string& dir, const std::string& json,
                                 const std::string& text, const std::string& dot);

}  // namespace topocoll::accept
