// LineInput (line_input.h): libedit's el_gets with a history of the lines
// read, where the build has libedit (LATTE_HAVE_LIBEDIT) and stdin is a
// terminal; read_line_bounded otherwise.
#include "tools/cli/line_input.h"

#include <clocale>
#include <cstdio>
#include <iostream>
#include <string>
#include <utility>

#include "tools/cli/console.h"

#if defined(LATTE_HAVE_LIBEDIT)
#include <histedit.h>
#include <langinfo.h>
#endif

namespace latte::cli {

#if defined(LATTE_HAVE_LIBEDIT)

struct LineInput::Editor {
  EditLine* el = nullptr;
  History* hist = nullptr;
  HistEvent event{};
  std::string saved_locale;  // LC_CTYPE before, restored at the end

  static const char* prompt_of(EditLine* el) {
    void* data = nullptr;
    el_get(el, EL_CLIENTDATA, &data);
    return static_cast<const LineInput*>(data)->prompt_.c_str();
  }

  explicit Editor(const LineInput* owner) {
    // libedit reads and shows characters in LC_CTYPE's encoding: UTF-8,
    // as everything Latte reads and writes.
    if (const char* now = std::setlocale(LC_CTYPE, nullptr)) saved_locale = now;
    const char* set = std::setlocale(LC_CTYPE, "");
    const std::string codeset = set ? nl_langinfo(CODESET) : "";
    if (codeset != "UTF-8") std::setlocale(LC_CTYPE, "C.UTF-8");
    el = el_init("latte", stdin, stderr, stderr);
    hist = history_init();
    if (el == nullptr || hist == nullptr) return;
    history(hist, &event, H_SETSIZE, 1000);
    history(hist, &event, H_SETUNIQUE, 1);
    el_set(el, EL_CLIENTDATA, const_cast<LineInput*>(owner));
    el_set(el, EL_PROMPT, &Editor::prompt_of);
    el_set(el, EL_EDITOR, "emacs");
    el_set(el, EL_HIST, history, hist);
    // Signals stay the program's own (CtrlCScope): a signal then ends the
    // wait for a line (el_gets returns null) instead of libedit passing it
    // on to the whole process group.
    el_set(el, EL_SIGNAL, 0);
    el_source(el, nullptr);  // the user's ~/.editrc, as other libedit programs read it
  }

  ~Editor() {
    if (el) el_end(el);
    if (hist) history_end(hist);
    if (!saved_locale.empty()) std::setlocale(LC_CTYPE, saved_locale.c_str());
  }

  bool ok() const { return el != nullptr && hist != nullptr; }

  LineRead read(std::string& line) {
    int n = 0;
    const char* got = el_gets(el, &n);
    if (got == nullptr || n <= 0) return LineRead::end;  // end of input, or a signal
    line.assign(got, static_cast<std::size_t>(n));
    if (!line.empty() && line.back() == '\n') line.pop_back();
    if (line.size() > kMaxInputTextBytes) return LineRead::too_long;
    if (!line.empty()) history(hist, &event, H_ENTER, line.c_str());
    return LineRead::line;
  }
};

#else

struct LineInput::Editor {
  explicit Editor(const LineInput*) {}
  bool ok() const { return false; }
  LineRead read(std::string&) { return LineRead::end; }
};

#endif

LineInput::LineInput(std::string prompt) : prompt_(std::move(prompt)) {
  if (!stdin_is_terminal()) return;
  editor_ = std::make_unique<Editor>(this);
  if (!editor_->ok()) editor_.reset();
}

LineInput::~LineInput() = default;

bool LineInput::editing() const { return editor_ != nullptr; }

LineRead LineInput::read(std::string& line) {
  if (editor_) return editor_->read(line);
  std::fputs(prompt_.c_str(), stderr);
  std::fflush(stderr);
  return read_line_bounded(std::cin, line);
}

}  // namespace latte::cli
