// `dsh-confine classify`: a failed run's stderr streamed through the classifier, with the
// rules of a printed plan or of a named backend's dialect.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <sys/stat.h>
#include <fstream>
#include <iostream>
#include <iterator>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>

#include "../lib/classify.hpp"
#include "../lib/config.hpp"
#include "../lib/error.hpp"
#include "../lib/plan.hpp"
#include "../platform/platform.hpp"
#include "common.hpp"

namespace dsh::cli {
namespace {

int parse_exit_code(const std::string& text) {
    if (text.empty()) throw Error(code::Usage, "--exit-code needs a number from 0 to 255");
    std::size_t used = 0;
    long value = -1;
    bool too_big = false;
    try {
        value = std::stol(text, &used, 10);
    } catch (const std::out_of_range&) {
        too_big = true;  // digits, but more than a long holds
    } catch (const std::exception&) {
        used = 0;
    }
    if (too_big) throw Error(code::Usage, "--exit-code " + text + " is out of range (0-255)");
    if (used != text.size() || text.front() == '+' || std::isspace(static_cast<unsigned char>(text.front())))
        throw Error(code::Usage, "--exit-code '" + text + "' is not a number");
    if (value < 0 || value > 255) throw Error(code::Usage, "--exit-code " + text + " is out of range (0-255)");
    return static_cast<int>(value);
}

std::string read_small_file(const std::string& path, const char* code_name) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(code_name, path + ": cannot be read");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return text;
}

}  // namespace

int run_classify(const std::string& plan_file, const std::string& backend, const std::string& exit_code_text,
                 const std::string& stderr_file, const std::string& format, const std::string& config_file) {
    if (plan_file.empty() == backend.empty())
        throw Error(code::Usage, "classify needs exactly one of --plan FILE or --backend NAME");
    if (format != "text" && format != "json") throw Error(code::Usage, "--format must be text or json, not '" + format + "'");
    const int exit_code = parse_exit_code(exit_code_text);
    Dialect dialect;
    if (!plan_file.empty()) {
        if (plan_file == "-") {
            // The plan on stdin (a pipe from --print), the stderr from a file: no temp file needed.
            if (stderr_file.empty() || stderr_file == "-")
                throw Error(code::Usage, "--plan - reads the plan from stdin: give the stderr with --stderr FILE");
            std::string plan((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
            dialect = parse_dialect(plan, "stdin");
        } else {
            dialect = parse_dialect(read_small_file(plan_file, code::Plan), plan_file);
        }
    } else {
        const Config config = load_configuration(config_file);
        auto made = platform::make_backend(backend, config, platform::HostContext{"/", {}});
        if (!made) {
            const auto& known = known_backend_names();
            if (std::find(known.begin(), known.end(), backend) == known.end()) {
                std::string message = "unknown backend '" + backend + "'";
                if (auto close = did_you_mean(backend, known)) message += " (did you mean '" + *close + "'?)";
                throw Error(code::Usage, message);
            }
            throw Error(code::Usage, "backend '" + backend + "' is not available on " + platform::system_name());
        }
        dialect = made->dialect();
    }
    StreamClassifier classifier(dialect);
    std::FILE* input = stdin;
    if (!stderr_file.empty()) {
        input = std::fopen(stderr_file.c_str(), "rb");
        if (!input) throw Error(code::Input, stderr_file + ": " + std::strerror(errno));
        struct stat st {};
        if (fstat(fileno(input), &st) == 0 && S_ISDIR(st.st_mode)) {
            std::fclose(input);
            throw Error(code::Input, stderr_file + ": is a directory, not a file of stderr output");
        }
    }
    // Large reads, as the classifier skips whole lines in bulk; left uninitialized, so a short
    // stderr touches one page of it, not 256.
    constexpr std::size_t kReadSize = 1 << 20;
    const std::unique_ptr<char[]> buffer(new char[kReadSize]);
    while (true) {
        const std::size_t n = std::fread(buffer.get(), 1, kReadSize, input);
        if (n > 0) classifier.feed(std::string_view(buffer.get(), n));
        if (n < kReadSize) {
            if (std::ferror(input)) throw Error(code::Input, (stderr_file.empty() ? "stdin" : stderr_file) + ": read error");
            break;
        }
    }
    if (input != stdin) std::fclose(input);
    const Classification result = classifier.finish(exit_code);
    write_out(format == "json" ? render_json(result) : render_text(result));
    return 0;
}

}  // namespace dsh::cli
