#include "config/decimal.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>

namespace llmgate::config {
namespace {

std::string printf_fixed(double v, int precision) {
  char buf[512];
  std::snprintf(buf, sizeof buf, "%.*f", precision, v);
  return buf;
}

// append_fixed writes what "%.*f" writes; whole numbers (precision 0, the
// route explanation's milliseconds) take an integer path of their own, which
// must round as printf does: to the nearest, ties to even.
TEST(Decimal, WholeNumbersAreWhatPrintfWrites) {
  const double cases[] = {0.0,
                          0.4,
                          0.5,
                          1.5,
                          2.5,
                          3.5,
                          0.49999999999999994,
                          4503599627370495.5,  // 2^52 - 0.5: the last double with a half
                          1e15 + 0.5,
                          1e17,
                          999999999999999999.0,
                          1e18,
                          1e50,
                          -0.0,
                          -0.4,
                          -0.5,
                          -2.5,
                          -1e20,
                          std::numeric_limits<double>::denorm_min(),
                          std::numeric_limits<double>::infinity(),
                          -std::numeric_limits<double>::infinity()};
  for (double v : cases) EXPECT_EQ(fixed(v, 0), printf_fixed(v, 0)) << v;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 100000; ++i) {
    // Magnitudes from 1e-3 to 1e19, and exact halves.
    const double scale = std::pow(10.0, std::uniform_real_distribution<double>(-3, 19)(rng));
    const double v = std::uniform_real_distribution<double>(0, 1)(rng) * scale;
    ASSERT_EQ(fixed(v, 0), printf_fixed(v, 0)) << v;
    const double half = std::floor(v) + 0.5;
    ASSERT_EQ(fixed(half, 0), printf_fixed(half, 0)) << half;
  }
  EXPECT_NE(fixed(std::nan(""), 0).find("nan"), std::string::npos);
  // (Past ~1e60 the text is printf's "%g" instead: decimal.h.)
}

// One to three decimals take a scaled-integer path of their own when the
// scaled value is not near a tie: it must agree with printf everywhere,
// near ties and exact binary halves included.
TEST(Decimal, OtherPrecisionsAreWhatPrintfWrites) {
  for (double v : {0.0,          0.005,
                   0.05,         0.15,
                   0.25,         0.35,
                   1.005,        2.675,
                   12.3456,      1e6 / 3,
                   -7.25,        0.0499999,
                   0.0500001,    0.999,
                   0.9999,       9.995,
                   99.95,        1e9 + 0.05,
                   1e11 + 0.25,  1e12,
                   5e12 + 0.125, 1e15 + 0.5,
                   0.0004,       0.00049,
                   0.0005,       std::numeric_limits<double>::denorm_min()}) {
    for (int p : {1, 2, 3}) EXPECT_EQ(fixed(v, p), printf_fixed(v, p)) << v << " " << p;
  }
  std::mt19937_64 rng(11);
  for (int i = 0; i < 100000; ++i) {
    const int p = 1 + static_cast<int>(rng() % 3);
    const double scale = std::pow(10.0, std::uniform_real_distribution<double>(-4, 13)(rng));
    const double v = std::uniform_real_distribution<double>(0, 1)(rng) * scale;
    ASSERT_EQ(fixed(v, p), printf_fixed(v, p)) << v << " " << p;
    // A decimal tie at this precision, and its neighbours a few ulps away.
    const double unit = std::pow(10.0, -p);
    const double tie = (std::floor(v / unit) + 0.5) * unit;
    for (double t : {tie, std::nextafter(tie, 0.0), std::nextafter(tie, 1e300)}) {
      ASSERT_EQ(fixed(t, p), printf_fixed(t, p)) << t << " " << p;
    }
  }
}

}  // namespace
}  // namespace llmgate::config
