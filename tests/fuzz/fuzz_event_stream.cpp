// Fuzzes the AWS event-stream framer (providers::EventStreamParser, through
// providers::Framer as the relay holds it).
//
// Input: a 4-byte header, then the bytes.
//   byte 0     frame size limit: 0 = 1 MiB, else byte0 * 8 bytes
//   byte 1     largest piece when split: 1 + byte1 bytes
//   bytes 2-3  seed for the piece lengths
// 1. The bytes as a stream, fed whole and in pseudo-random pieces: both give
//    the same frames and the same status; every frame handed out passes the
//    CRC oracle (CRC-32 computed bit by bit, not by the parser's table) over
//    its prelude and its whole message, and lies within the limit.
// 2. The bytes as payloads: split at each 0xFF into payloads (event types
//    taken from their first bytes), encoded, the stream cut into two reads
//    at every byte boundary (64 seeded ones past 512 bytes): each cut gives
//    back exactly those events.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "providers/event_stream.h"
#include "providers/framer.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/support/crc32_oracle.h"

namespace {

using llmgate::providers::EventStreamHeader;
using llmgate::providers::Frame;
using llmgate::providers::Framer;
using llmgate::providers::FrameStatus;
using llmgate::providers::Framing;

using llmgate::testing::oracle_crc32;
const auto be32 = llmgate::testing::read_be32;

struct Got {
  std::string data, event;
  bool exception;
  bool operator==(const Got&) const = default;
};

struct Outcome {
  std::vector<Got> frames;
  FrameStatus status = FrameStatus::kOk;
  bool operator==(const Outcome&) const = default;
};

Outcome run(std::string_view bytes, std::size_t limit, const std::vector<std::size_t>& pieces,
            bool oracle = true) {
  Framer f(Framing::kEventStream, limit);
  Outcome out;
  std::size_t at = 0, i = 0;
  while (at < bytes.size()) {
    const std::size_t n =
        std::min(i < pieces.size() ? pieces[i++] : bytes.size(), bytes.size() - at);
    auto space = f.prepare(n);
    FUZZ_CHECK(space.size() >= n);
    std::copy_n(bytes.data() + at, n, space.data());
    f.commit(n);
    at += n;
    out.status = f.drain([&](const Frame& fr) {
      FUZZ_CHECK(fr.raw.size() >= 16 && fr.raw.size() <= limit);
      out.frames.push_back({std::string(fr.data), std::string(fr.event), fr.exception});
      if (!oracle) return;
      FUZZ_CHECK(be32(fr.raw) == fr.raw.size());
      FUZZ_CHECK(oracle_crc32(fr.raw.substr(0, 8)) == be32(fr.raw.substr(8)));
      FUZZ_CHECK(oracle_crc32(fr.raw.substr(0, fr.raw.size() - 4)) ==
                 be32(fr.raw.substr(fr.raw.size() - 4)));
    });
    if (out.status != FrameStatus::kOk) break;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 4) return 0;
  const std::size_t limit = data[0] == 0 ? (1u << 20) : std::size_t{data[0]} * 8;
  const std::size_t largest = 1 + std::size_t{data[1]};
  std::uint32_t seed = (std::uint32_t{data[2]} << 8) | data[3];
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 4, size - 4);

  // 1. As a stream.
  std::vector<std::size_t> pieces;
  for (std::size_t total = 0; total < bytes.size();) {
    seed = seed * 1103515245u + 12345u;
    const std::size_t n = 1 + (seed >> 8) % largest;
    pieces.push_back(n);
    total += n;
  }
  const Outcome whole = run(bytes, limit, {});
  const Outcome split = run(bytes, limit, pieces);
  FUZZ_CHECK(whole == split);

  // 2. As payloads, encoded: every cut gives them back.
  std::vector<Got> want;
  std::string stream;
  for (std::string_view rest = bytes; !rest.empty() && want.size() < 8;) {
    const auto ff = rest.find('\xff');
    const std::string_view payload = rest.substr(0, ff);
    rest = ff == std::string_view::npos ? std::string_view() : rest.substr(ff + 1);
    const std::string event(payload.substr(0, 3));
    const bool exception = !payload.empty() && (payload[0] & 1);
    const std::vector<EventStreamHeader> h{{":message-type", exception ? "exception" : "event"},
                                           {exception ? ":exception-type" : ":event-type", event}};
    stream += llmgate::providers::encode_event_stream_message(h, payload);
    want.push_back({std::string(payload), event, exception});
  }
  const std::size_t big = 1u << 20;
  const Outcome all = run(stream, big, {});
  FUZZ_CHECK(all.status == FrameStatus::kOk);
  FUZZ_CHECK(all.frames == want);
  // (Every cut of a short stream; 64 of a longer one, spread by the seed.)
  const bool every = stream.size() <= 512;
  for (std::size_t i = 0; i <= (every ? stream.size() : 63); ++i) {
    seed = seed * 1103515245u + 12345u;
    const std::size_t cut = every ? i : (seed >> 4) % (stream.size() + 1);
    FUZZ_CHECK(run(stream, big, {cut}, /*oracle=*/false) == all);
  }
  return 0;
}
