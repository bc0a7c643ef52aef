#include "command_line.hpp"

namespace dsh::win32 {

std::string quote_argument(std::string_view arg) {
    if (!arg.empty() && arg.find_first_of(" \t\n\v\"") == std::string_view::npos) return std::string(arg);
    std::string out = "\"";
    std::size_t backslashes = 0;
    for (const char c : arg) {
        if (c == '\\') {
            ++backslashes;
            continue;
        }
        if (c == '"') {
            // Every backslash before a quote is doubled, and one more escapes the quote itself.
            out.append(backslashes * 2 + 1, '\\');
        } else {
            out.append(backslashes, '\\');
        }
        backslashes = 0;
        out.push_back(c);
    }
    // Backslashes before the closing quote are doubled, or they would escape it.
    out.append(backslashes * 2, '\\');
    out.push_back('"');
    return out;
}

std::optional<std::string> build_command_line(const std::vector<std::string>& argv) {
    if (argv.empty() || argv.front().find('"') != std::string::npos) return std::nullopt;
    const std::string& program = argv.front();
    std::string line = program.empty() || program.find_first_of(" \t") != std::string::npos ? "\"" + program + "\""
                                                                                            : program;
    for (std::size_t i = 1; i < argv.size(); ++i) line += " " + quote_argument(argv[i]);
    return line;
}

std::vector<std::string> split_command_line(std::string_view line, bool first_is_program) {
    std::vector<std::string> out;
    std::size_t i = 0;
    auto blank = [&](std::size_t at) { return at < line.size() && (line[at] == ' ' || line[at] == '\t'); };
    if (first_is_program) {
        std::string program;
        if (i < line.size() && line[i] == '"') {
            const std::size_t close = line.find('"', i + 1);
            program = std::string(line.substr(i + 1, close == std::string_view::npos ? std::string_view::npos : close - i - 1));
            i = close == std::string_view::npos ? line.size() : close + 1;
        } else {
            while (i < line.size() && !blank(i)) program.push_back(line[i++]);
        }
        out.push_back(program);
    }
    while (true) {
        while (blank(i)) ++i;
        if (i >= line.size()) break;
        std::string arg;
        bool quoted = false;
        while (i < line.size() && (quoted || !blank(i))) {
            std::size_t backslashes = 0;
            while (i < line.size() && line[i] == '\\') {
                ++backslashes;
                ++i;
            }
            if (i < line.size() && line[i] == '"') {
                arg.append(backslashes / 2, '\\');
                if (backslashes % 2 == 1) {
                    arg.push_back('"');
                } else if (quoted && i + 1 < line.size() && line[i + 1] == '"') {
                    arg.push_back('"');  // "" inside quotes: a literal quote (msvcrt 2008 and later)
                    ++i;
                } else {
                    quoted = !quoted;
                }
                ++i;
            } else {
                arg.append(backslashes, '\\');
                if (i < line.size() && (quoted || !blank(i))) arg.push_back(line[i++]);
            }
        }
        out.push_back(arg);
    }
    return out;
}

std::optional<std::u16string> utf8_to_utf16(std::string_view text) {
    std::u16string out;
    out.reserve(text.size());
    std::size_t i = 0;
    while (i < text.size()) {
        const auto byte = static_cast<unsigned char>(text[i]);
        char32_t code = 0;
        std::size_t extra = 0;
        if (byte < 0x80) {
            code = byte;
        } else if (byte >= 0xC2 && byte <= 0xDF) {
            code = byte & 0x1F;
            extra = 1;
        } else if (byte >= 0xE0 && byte <= 0xEF) {
            code = byte & 0x0F;
            extra = 2;
        } else if (byte >= 0xF0 && byte <= 0xF4) {
            code = byte & 0x07;
            extra = 3;
        } else {
            return std::nullopt;  // a continuation byte first, C0/C1 (overlong), or F5..FF
        }
        if (extra > 0 && i + extra >= text.size()) return std::nullopt;  // truncated
        for (std::size_t k = 1; k <= extra; ++k) {
            const auto next = static_cast<unsigned char>(text[i + k]);
            if ((next & 0xC0) != 0x80) return std::nullopt;
            code = (code << 6) | (next & 0x3F);
        }
        // The shortest form only, no surrogates, nothing above U+10FFFF.
        if ((extra == 2 && code < 0x800) || (extra == 3 && (code < 0x10000 || code > 0x10FFFF)) ||
            (code >= 0xD800 && code <= 0xDFFF))
            return std::nullopt;
        if (code >= 0x10000) {
            code -= 0x10000;
            out.push_back(static_cast<char16_t>(0xD800 + (code >> 10)));
            out.push_back(static_cast<char16_t>(0xDC00 + (code & 0x3FF)));
        } else {
            out.push_back(static_cast<char16_t>(code));
        }
        i += extra + 1;
    }
    return out;
}

std::string utf16_to_utf8(std::u16string_view text) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        char32_t code = text[i];
        if (code >= 0xD800 && code <= 0xDBFF && i + 1 < text.size() && text[i + 1] >= 0xDC00 && text[i + 1] <= 0xDFFF) {
            code = 0x10000 + ((code - 0xD800) << 10) + (text[i + 1] - 0xDC00);
            ++i;
        } else if (code >= 0xD800 && code <= 0xDFFF) {
            code = 0xFFFD;
        }
        if (code < 0x80) {
            out.push_back(static_cast<char>(code));
        } else if (code < 0x800) {
            out.push_back(static_cast<char>(0xC0 | (code >> 6)));
            out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
        } else if (code < 0x10000) {
            out.push_back(static_cast<char>(0xE0 | (code >> 12)));
            out.push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
            out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
        } else {
            out.push_back(static_cast<char>(0xF0 | (code >> 18)));
            out.push_back(static_cast<char>(0x80 | ((code >> 12) & 0x3F)));
            out.push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
            out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
        }
    }
    return out;
}

}  // namespace dsh::win32
