# Compiles the console page into the binary: writes OUT, a .cpp defining
# llmgate::gateway::console_page() as the bytes of IN (a raw string literal).
# Run by gateway/CMakeLists.txt: cmake -DIN=console.html -DOUT=... -P embed.cmake
file(READ "${IN}" page)
set(delim "llmgate_page")
string(FIND "${page}" ")${delim}\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw string delimiter )${delim}\"")
endif()
file(WRITE "${OUT}" "// Generated from gateway/admin/console/console.html by gateway/admin/console/embed.cmake.
#include \"gateway/admin/console_page.h\"

namespace llmgate::gateway {

std::string_view console_page() {
  static constexpr char kPage[] = R\"${delim}(${page})${delim}\";
  return {kPage, sizeof kPage - 1};
}

}  // namespace llmgate::gateway
")
