# INTERFACE targets that carry build policy: warnings (errors in CI) and sanitizers.
add_library(dsh_warnings INTERFACE)
if(MSVC)
  # cl's /Wall is every warning there is (the C runtime's and windows.h's own included), and it
  # ignores GCC's spellings with a warning each: /W4 is its counterpart of the set below.
  # /bigobj: a test source with GoogleTest and nlohmann_json outgrows the default COFF
  # section limit (C1128).
  target_compile_options(dsh_warnings INTERFACE /W4 /bigobj)
  if(DSH_WERROR)
    target_compile_options(dsh_warnings INTERFACE /WX)
  endif()
else()
  target_compile_options(dsh_warnings INTERFACE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor)
  if(DSH_WERROR)
    target_compile_options(dsh_warnings INTERFACE -Werror)
  endif()
endif()
if(DSH_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
