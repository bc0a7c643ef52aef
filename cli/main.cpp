#include "app.hpp"

int main(int argc, char** argv) { return dsh::cli::run(argc, argv); }
