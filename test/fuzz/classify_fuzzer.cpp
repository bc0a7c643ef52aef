// Fuzzes the streaming classifier against the algorithm of docs/classify.md written the plain
// way (whole lines, substring search): the input decodes into a dialect, an exit status, a
// stderr text and the chunk sizes it is fed in. The verdict and its evidence (the path a denial
// names included) must not depend on the chunking, and must be the plain algorithm's.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lib/classify.hpp"
#include "lib/denied_path.hpp"

namespace {

void require(bool condition) {
    if (!condition) __builtin_trap();
}

char fold(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; }

std::string folded(std::string_view text) {
    std::string out(text);
    std::transform(out.begin(), out.end(), out.begin(), fold);
    return out;
}

std::string upper(std::string_view text) {
    std::string out(text);
    for (char& c : out)
        if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
    return out;
}

bool word_byte(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Capitals and digits, beginning with a capital: an errno name, matched as a whole word.
bool errno_name(const std::string& signature) {
    if (signature.empty() || signature[0] < 'A' || signature[0] > 'Z') return false;
    return std::all_of(signature.begin(), signature.end(), [](char c) { return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); });
}

bool contains(const std::string& line, const std::string& signature, bool words) {
    const std::string needle = folded(signature);
    if (!words || !errno_name(signature)) return line.find(needle) != std::string::npos;
    for (std::size_t at = line.find(needle); at != std::string::npos; at = line.find(needle, at + 1)) {
        const std::size_t end = at + needle.size();
        if ((at == 0 || !word_byte(line[at - 1])) && (end == line.size() || !word_byte(line[end]))) return true;
    }
    return false;
}

// The first signature of `list`, in list order, that the folded line contains (errno names of
// the denial list as whole words).
const std::string* first_contained(const std::vector<std::string>& list, const std::string& line, bool words) {
    for (const auto& signature : list)
        if (contains(line, signature, words)) return &signature;
    return nullptr;
}

dsh::Classification plain_classify(const dsh::Dialect& dialect, std::string_view text, int exit_code,
                                   bool runner_rules) {
    struct Hit {
        std::string line;
        std::string signature;
    };
    std::vector<std::optional<Hit>> rule_hits(dialect.runnerFailureRules.size());
    std::optional<Hit> denial_hit;
    std::vector<std::string_view> lines;
    for (std::size_t start = 0; start < text.size();) {
        const std::size_t end = std::min(text.find('\n', start), text.size());
        lines.push_back(text.substr(start, end - start));
        start = end + 1;
    }
    for (std::string_view line : lines) {
        const std::string line_folded = folded(line);
        std::string_view stripped = line;
        if (!stripped.empty() && stripped.back() == '\r') stripped.remove_suffix(1);
        const std::string evidence(stripped.substr(0, dsh::kEvidenceBytes));
        if (!denial_hit)
            if (const std::string* s = first_contained(dialect.denialSignatures, line_folded, true))
                denial_hit = Hit{evidence, *s};
        for (std::size_t r = 0; r < rule_hits.size(); ++r) {
            const auto& rule = dialect.runnerFailureRules[r];
            if (rule_hits[r]) continue;
            const std::string* s = first_contained(rule.fatalSignatures, line_folded, false);
            if (!s) continue;
            const bool informational = std::any_of(rule.informationalLines.begin(), rule.informationalLines.end(),
                                                   [&](const std::string& info) { return folded(info) == folded(stripped); });
            if (!informational) rule_hits[r] = Hit{evidence, *s};
        }
    }
    dsh::Classification result;
    result.exitCode = exit_code;
    if (exit_code == 0) {
        result.verdict = dsh::Verdict::Success;
        return result;
    }
    for (std::size_t r = 0; runner_rules && r < rule_hits.size(); ++r) {
        const auto& codes = dialect.runnerFailureRules[r].allowedExitCodes;
        if (codes && std::find(codes->begin(), codes->end(), exit_code) == codes->end()) continue;
        if (!rule_hits[r]) continue;
        result.verdict = dsh::Verdict::RunnerFailure;
        result.line = rule_hits[r]->line;
        result.signature = rule_hits[r]->signature;
        result.rule = r;
        return result;
    }
    if (denial_hit) {
        result.verdict = dsh::Verdict::Denial;
        result.line = denial_hit->line;
        result.signature = denial_hit->signature;
        result.path = dsh::denied_path(*result.line, *result.signature);
    }
    return result;
}

bool same(const dsh::Classification& a, const dsh::Classification& b) {
    return a.verdict == b.verdict && a.exitCode == b.exitCode && a.line == b.line && a.signature == b.signature &&
           a.rule == b.rule && a.path == b.path;
}

std::string nonempty(std::string text) { return text.empty() ? std::string("e") : text; }

// stderr text with escapes (0xFF then an op byte) that splice in the dialect's own strings, in
// either case, and long runs, which random bytes would rarely produce.
std::string expand(std::string_view script, const std::vector<std::string>& signatures,
                   const std::vector<std::string>& infos) {
    std::string out;
    for (std::size_t i = 0; i < script.size(); ++i) {
        const auto c = static_cast<unsigned char>(script[i]);
        if (c != 0xFF || i + 1 == script.size()) {
            out += script[i];
            continue;
        }
        const auto op = static_cast<unsigned char>(script[++i]);
        const std::size_t arg = op / 4;
        if (op == 0xFF) out += script[i];
        else if (op % 4 == 0 && !signatures.empty()) out += signatures[arg % signatures.size()];
        else if (op % 4 == 1 && !signatures.empty()) out += upper(signatures[arg % signatures.size()]);
        else if (op % 4 == 2 && !infos.empty()) out += infos[arg % infos.size()];
        else if (op % 4 == 3) out.append(arg * 100, 'p');
    }
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    FuzzedDataProvider in(data, size);
    dsh::Dialect dialect;
    std::vector<std::string> signatures, infos;
    const int denials = in.ConsumeIntegralInRange(0, 3);
    for (int i = 0; i < denials; ++i) {
        std::string signature = nonempty(in.ConsumeRandomLengthString(24));
        if (in.ConsumeBool()) {  // an errno name, matched as a word: capitals and digits
            for (char& c : signature) {
                const auto b = static_cast<unsigned char>(c);
                c = b % 4 == 0 ? static_cast<char>('0' + b % 10) : static_cast<char>('A' + b % 26);
            }
            signature[0] = static_cast<char>('A' + static_cast<unsigned char>(signature[0]) % 26);
        }
        dialect.denialSignatures.push_back(signature);
    }
    signatures = dialect.denialSignatures;
    const int rules = in.ConsumeIntegralInRange(0, 3);
    for (int r = 0; r < rules; ++r) {
        dsh::RunnerFailureRule rule;
        const int fatal = in.ConsumeIntegralInRange(1, 3);
        for (int i = 0; i < fatal; ++i) rule.fatalSignatures.push_back(nonempty(in.ConsumeRandomLengthString(24)));
        const int info = in.ConsumeIntegralInRange(0, 2);
        for (int i = 0; i < info; ++i) {
            std::string line = nonempty(in.ConsumeRandomLengthString(48));
            // Now and then an informational line longer than the evidence prefix.
            if (in.ConsumeIntegralInRange(0, 7) == 0) line = std::string(dsh::kEvidenceBytes, 'p') + line;
            rule.informationalLines.push_back(line);
        }
        if (in.ConsumeBool()) {
            std::vector<int> codes(static_cast<std::size_t>(in.ConsumeIntegralInRange(1, 3)));
            for (int& code : codes) code = in.ConsumeIntegralInRange(1, 255);
            rule.allowedExitCodes = codes;
        }
        signatures.insert(signatures.end(), rule.fatalSignatures.begin(), rule.fatalSignatures.end());
        infos.insert(infos.end(), rule.informationalLines.begin(), rule.informationalLines.end());
        dialect.runnerFailureRules.push_back(std::move(rule));
    }
    const int exit_code = in.ConsumeIntegralInRange(0, 3) == 0 ? 0 : in.ConsumeIntegralInRange(1, 255);
    const bool runner_rules = in.ConsumeIntegralInRange(0, 3) != 0;
    std::uint32_t chunking = in.ConsumeIntegral<std::uint32_t>() | 1;
    const std::string text = expand(in.ConsumeRemainingBytesAsString(), signatures, infos);

    dsh::StreamClassifier stream(dialect);
    for (std::size_t done = 0; done < text.size();) {
        chunking ^= chunking << 13;
        chunking ^= chunking >> 17;
        chunking ^= chunking << 5;
        const std::size_t limit = (chunking & 1) ? 16 : 8192;
        const std::size_t chunk = std::min<std::size_t>(text.size() - done, 1 + (chunking >> 1) % limit);
        stream.feed(std::string_view(text).substr(done, chunk));
        done += chunk;
    }
    const dsh::Classification streamed = stream.finish(exit_code, runner_rules);
    const dsh::Classification whole = dsh::classify(dialect, text, exit_code);

    require(same(streamed, plain_classify(dialect, text, exit_code, runner_rules)));
    require(same(whole, plain_classify(dialect, text, exit_code, true)));
    for (const auto* result : {&streamed, &whole}) {
        require((result->verdict == dsh::Verdict::Success) == (exit_code == 0));
        require(!result->line || result->line->size() <= dsh::kEvidenceBytes);
        require(result->rule.has_value() == (result->verdict == dsh::Verdict::RunnerFailure));
        require(result->line.has_value() == result->signature.has_value());
        // A path only for a denial, and always text of its line.
        require(!result->path || (result->verdict == dsh::Verdict::Denial && !result->path->empty() &&
                                  result->line->find(*result->path) != std::string::npos));
    }
    require(runner_rules || streamed.verdict != dsh::Verdict::RunnerFailure);
    return 0;
}
