#include "accept/report_files.h"

#include "config/user_files.h"
#include "exec/private_conversion.h"

namespace topocoll::accept {
namespace {

void write_file(const std::string& path, const std::string& contents) {
  try {
    config::replace_file(path, contents);
  } catch (const config::UserFileError& e) {
    throw ReportError(e.what());
  }
}

// Graphviz writes its PNG by name, through any link at that name: it draws in a directory of
// our own (exec/private_conversion.h) and the picture is put in place like every other file.
std::string draw_png(const std::string& dot, std::string* not_drawn) {
  const exec::Conversion png =
      exec::convert_privately(dot, "dot", "png", {{"dot", "-Tpng", "-o", "{out}", "{in}"}}, "Graphviz's dot");
  if (!png.succeeded()) *not_drawn = png.failure;
  return png.output;
}

}  // namespace

void prepare_report_dir(const std::string& dir) {
  try {
    config::prepare_output_dir(dir);
  } catch (const config::UserFileError& e) {
    throw ReportError(e.what());
  }
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
