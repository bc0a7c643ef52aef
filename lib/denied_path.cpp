#include "denied_path.hpp"

#include <array>

#include "classify.hpp"

namespace dsh {
namespace {

struct Quote {
    std::string_view open;
    std::string_view close;
};

// ASCII quotes, the `...' of older GNU tools, and the typographic quotes of GNU tools in a
// UTF-8 locale (mkdir: cannot create directory ‘/x’).
constexpr std::array<Quote, 6> kQuotes = {{{"'", "'"},
                                           {"\"", "\""},
                                           {"`", "'"},
                                           {"`", "`"},
                                           {"\xE2\x80\x98", "\xE2\x80\x99"},
                                           {"\xE2\x80\x9C", "\xE2\x80\x9D"}}};

bool has_control(std::string_view text) {
    for (char c : text)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return true;
    return false;
}

bool is_blank(char c) { return c == ' ' || c == '\t'; }

// A quoted path: anything non-empty, printable, between its quotes.
std::optional<std::string> clean(std::string_view text) {
    if (text.empty() || has_control(text)) return std::nullopt;
    return std::string(text);
}

// An unquoted word is taken for a path only if it looks like one: it holds a '/', or a '.'
// and a letter (out.txt), and is no URL. So `dir` in "couldn't create a temp dir: ..." or an
// address like 10.0.0.1 is not.
std::optional<std::string> path_like(std::string_view word) {
    if (word.empty() || has_control(word) || word.find("://") != std::string_view::npos) return std::nullopt;
    bool letter = false;
    for (char c : word) letter = letter || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (word.find('/') == std::string_view::npos && !(word.find('.') != std::string_view::npos && letter))
        return std::nullopt;
    return std::string(word);
}

// The quoted text or path-like word that begins at `at`.
std::optional<std::string> path_at(std::string_view line, std::size_t at) {
    const std::string_view rest = line.substr(at);
    for (const Quote& q : kQuotes) {
        if (!rest.starts_with(q.open)) continue;
        const std::size_t close = rest.find(q.close, q.open.size());
        if (close != std::string_view::npos) return clean(rest.substr(q.open.size(), close - q.open.size()));
    }
    std::size_t end = 0;
    while (end < rest.size() && !is_blank(rest[end])) ++end;
    return path_like(rest.substr(0, end));
}

// The quoted text or path-like word that ends at `end`.
std::optional<std::string> path_before(std::string_view line, std::size_t end) {
    const std::string_view head = line.substr(0, end);
    for (const Quote& q : kQuotes) {
        if (!head.ends_with(q.close) || head.size() <= q.close.size()) continue;
        const std::string_view inside = head.substr(0, head.size() - q.close.size());
        const std::size_t open = inside.rfind(q.open);
        if (open != std::string_view::npos) return clean(inside.substr(open + q.open.size()));
    }
    std::size_t start = head.size();
    while (start > 0 && !is_blank(head[start - 1])) --start;
    return path_like(head.substr(start));
}

// Rust's " (os error N)" after the error text.
std::size_t skip_os_error(std::string_view line, std::size_t at) {
    constexpr std::string_view kOsError = " (os error ";
    if (line.substr(at).starts_with(kOsError)) {
        std::size_t i = at + kOsError.size();
        while (i < line.size() && line[i] >= '0' && line[i] <= '9') ++i;
        if (i < line.size() && line[i] == ')') return i + 1;
    }
    return at;
}

}  // namespace

std::optional<std::string> denied_path(std::string_view line, std::string_view signature) {
    const std::size_t start = find_signature(line, signature);
    if (start == std::string_view::npos) return std::nullopt;
    const std::size_t end = skip_os_error(line, start + signature.size());

    // After the error text: rustc's `at path "/x"`; Python's `: '/x'`, Java's
    // `AccessDeniedException: /x`, javac's `error while writing Hello: /x/Hello.class` (one word
    // at most between the text and the colon).
    constexpr std::string_view kAtPath = " at path ";
    if (line.substr(end).starts_with(kAtPath))
        if (auto path = path_at(line, end + kAtPath.size())) return path;
    if (const std::size_t colon = line.find(": ", end); colon != std::string_view::npos) {
        std::string_view gap = line.substr(end, colon - end);
        if (!gap.empty() && gap.front() == ' ') gap.remove_prefix(1);
        if (gap.find_first_of(" \t") == std::string_view::npos)
            if (auto path = path_at(line, colon + 2)) return path;
    }
    // Node's `EACCES: permission denied, mkdir '/x'` (and `rename '/a' -> '/b'`): the syscall, then
    // the quoted path.
    if (const std::size_t comma = line.find(", ", end); comma != std::string_view::npos) {
        std::size_t i = comma + 2;
        while (i < line.size() && ((line[i] >= 'a' && line[i] <= 'z') || line[i] == '_')) ++i;
        if (i > comma + 2 && i + 1 < line.size() && line[i] == ' ' && line[i + 1] == '\'')
            if (auto path = path_at(line, i + 1)) return path;
    }
    // Before the error text: `cannot create /x: Read-only file system` (sh, git, Go, Java's
    // FileSystemException, javac), `cannot touch '/x': ...` (coreutils, git); and Java's
    // `FileNotFoundException: /x (Permission denied)`.
    if (start >= 2 && line.substr(start - 2, 2) == ": ")
        if (auto path = path_before(line, start - 2)) return path;
    if (start >= 2 && line.substr(start - 2, 2) == " (")
        if (auto path = path_before(line, start - 2)) return path;
    return std::nullopt;
}

}  // namespace dsh
