// /admin/routes?format=text: columns that never pass a long name off as a
// shorter one.
#include "gateway/admin/admin_routes.h"

#include <gtest/gtest.h>

namespace llmgate::gateway {
namespace {

TEST(RoutesText, ALongNameIsCutWithAnEllipsis) {
  EXPECT_EQ(fit_column("groq/llama-3.3-70b", 44), "groq/llama-3.3-70b");
  EXPECT_EQ(fit_column("0123456789", 10), "0123456789");
  EXPECT_EQ(fit_column("0123456789A", 10), "0123456...");
  EXPECT_EQ(fit_column("abcdef", 3), "...");
  // Never inside a UTF-8 character: "é" is two bytes.
  EXPECT_EQ(fit_column("abcdé-fghij", 8), "abcd...");
  EXPECT_EQ(fit_column("abcdéfghij", 9), "abcdé...");
}

TEST(RoutesText, TheLegendNamesEveryColumn) {
  const std::string legend = kRoutesTextLegend;
  for (const char* column :
       {"est", "p50", "cens", "tps_p50", "chars/s", "err%", "infl", "$/M_out", "score", "'>'"})
    EXPECT_NE(legend.find(column), std::string::npos) << column;
}

}  // namespace
}  // namespace llmgate::gateway
