#pragma once

namespace dsh::cli {

// The whole command line: parse, dispatch, and the one top-level catch.
int run(int argc, char** argv);

}  // namespace dsh::cli
