// Fuzzes the plan reader (`classify --plan`): any bytes give a Dialect or a dsh::Error (PLAN).
// An accepted dialect is one the classifier takes, and it survives the trip through a rendered
// plan unchanged, so what --print writes is what classify reads.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "lib/classify.hpp"
#include "lib/error.hpp"
#include "lib/plan.hpp"

namespace {

void require(bool condition) {
    if (!condition) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view document(reinterpret_cast<const char*>(data), size);
    dsh::Dialect dialect;
    try {
        dialect = dsh::parse_dialect(document, "fuzz.json");
    } catch (const dsh::Error& e) {
        require(e.code() == dsh::code::Plan);
        return 0;
    }
    dsh::StreamClassifier classifier(dialect);  // validate_dialect must agree with the reader

    dsh::ConfinedArgv confined;
    confined.argv = {"true"};
    confined.backend = "fuzz";
    confined.denialSignatures = dialect.denialSignatures;
    confined.runnerFailureRules = dialect.runnerFailureRules;
    const dsh::Plan plan = dsh::confined_plan(dsh::SandboxExecutionPolicy{}, confined);
    require(dsh::parse_dialect(dsh::render_plan_json(plan), "rendered.json") == dialect);
    return 0;
}
