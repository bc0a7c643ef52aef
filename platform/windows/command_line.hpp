// Windows command lines: a child receives one UTF-16 string, which its C runtime splits back
// into argv by the CommandLineToArgvW rules. Quoting by those rules is pure code, compiled and
// unit-tested on every system, and so is the strict UTF-8 <-> UTF-16 conversion the argv goes
// through on its way into CreateProcessW.
//
// The rules (what msvcrt and CommandLineToArgvW agree on for everything this quoting emits):
//   - arguments are separated by spaces or tabs outside double quotes;
//   - 2n backslashes before a quote give n backslashes, and the quote opens or closes a
//     quoted region; 2n+1 backslashes before a quote give n backslashes and a literal quote;
//   - backslashes not followed by a quote are literal;
//   - the first word (the program name) is special: it ends at the first space or tab, or is
//     everything between a leading quote and the next quote, with no backslash escapes. A
//     program name therefore cannot contain a quote (Windows file names cannot either).
// Not covered: cmd.exe's own parsing of a batch file's arguments (^, %, &, | ...), which
// does not follow these rules at all.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dsh::win32 {

// One argument (not the program name), quoted only when it must be: empty, or containing a
// space, tab, newline, vertical tab or double quote.
std::string quote_argument(std::string_view arg);

// The program name and quoted arguments, separated by single spaces. nullopt when argv is
// empty or the program name cannot be expressed (it contains a double quote).
std::optional<std::string> build_command_line(const std::vector<std::string>& argv);

// The CommandLineToArgvW split of a command line (for tests and for reading back what a
// child will see); `first_is_program` applies the program-name rule to the first word.
std::vector<std::string> split_command_line(std::string_view line, bool first_is_program = true);

// Strict UTF-8 to UTF-16: nullopt for malformed input (overlong forms, surrogates, code
// points above U+10FFFF, truncated sequences), so no argument is silently altered.
std::optional<std::u16string> utf8_to_utf16(std::string_view text);

// UTF-16 to UTF-8. Windows names may hold unpaired surrogates; each becomes U+FFFD.
std::string utf16_to_utf8(std::u16string_view text);

}  // namespace dsh::win32
