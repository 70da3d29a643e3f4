// The relay's state for one attempt, apart from its sockets: what each
// upstream event does (first token, usage, finish, end, fault), which bytes
// the client gets (held before the commit, usage it did not ask for
// removed), when the attempt may claim the client, the mid-stream speed
// sample, the trailers and the non-streamed answer. Pure: the relay
// (relay.cpp) reads the upstream into the SSE parser and writes the outbox;
// tests/unit/gateway/relay_state_test.cpp feeds it events directly.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "gateway/apis/chat_request.h"
#include "gateway/apis/client_api.h"
#include "gateway/apis/outbox.h"
#include "gateway/proxy/continuation.h"
#include "gateway/proxy/failover_policy.h"
#include "providers/chat_chunk.h"
#include "providers/sse_parser.h"
#include "providers/upstream_protocol.h"
#include "routing/attempt_record.h"

namespace llmgate::gateway {

class RelayState {
 public:
  using Clock = std::chrono::steady_clock;
  // The mid-stream speed sample: after this many output events and this long.
  static constexpr std::size_t kSpeedSampleEvents = 16;
  static constexpr auto kSpeedSampleAfter = std::chrono::milliseconds(500);

  // `rec` receives the first and last token times, output size and usage.
  // `upstream`: what the attempt asked for (the translator of a protocol
  // other than OpenAI's is opened for it).
  RelayState(const ClientApi& api, const providers::UpstreamProtocol& protocol,
             const ChatRequest& req, routing::AttemptRecord& rec,
             const providers::UpstreamRequest* upstream = nullptr);

  // One upstream event, seen at `now`. Events after the end or a fault are ignored.
  void on_event(const providers::Frame& ev, Clock::time_point now);
  // The upstream body ended without a transport error (a protocol without
  // an end marker completes its stream here).
  void on_body_end(Clock::time_point now);
  // The framer refused a frame over the size limit.
  void on_event_too_large();
  // The framer found bytes that are no frame of the protocol's framing (an
  // event-stream CRC mismatch): `why`.
  void on_malformed_frame(std::string_view why);

  // The fault that broke the stream, if any, with the observer's words (an
  // in-band error's message is the upstream's own: redact before use).
  const std::optional<failover::Fault>& fault() const { return fault_; }
  const std::string& fault_text() const { return fault_text_; }
  // The upstream's end marker arrived: read no further.
  bool done() const { return done_; }
  // Nothing more is worth reading (the end, or a fault).
  bool stopped() const { return done_ || fault_.has_value(); }
  // The answer is complete: the end marker, or a finish_reason (a clean end
  // of body after it is not a cut).
  bool complete() const { return done_ || saw_finish_; }
  // The attempt has produced something the client can be given: it may
  // claim the client (the first token, or an answer that finished without one).
  bool has_output() const { return rec_.first_token.has_value() || saw_finish_ || done_; }

  // Streaming: the head goes out once, at the first output.
  bool should_commit() const { return streaming_ && !committed_ && has_output(); }
  // Output events seen (the speed guard's count).
  std::size_t outputs() const { return outputs_; }
  void mark_committed() { committed_ = true; }
  bool committed() const { return committed_; }

  // The output speed (characters/s) measured mid-stream, once per attempt,
  // when due: a long answer from a slow deployment teaches the router
  // before it ends.
  std::optional<double> take_speed_sample() {
    auto s = speed_sample_;
    speed_sample_.reset();
    return s;
  }

  // The number of the stream's next event (Responses API): one past the
  // last relayed event's sequence_number, or the count of events relayed.
  std::int64_t next_sequence() const { return next_sequence_; }

  // The id of the response the upstream created (Responses API), once.
  std::string take_response_id() { return std::exchange(response_id_, {}); }

  // Continuation (continuation.h): keep what the client is told, or (a
  // continuation) give the client `splice`'s rewriting of each event.
  void keep_transcript() { transcript_.emplace(); }
  void splice_into(ContinuationSplice* splice) { splice_ = splice; }
  // What this attempt told the client (with keep_transcript()).
  std::optional<StreamTranscript>& transcript() { return transcript_; }

  // What the client gets next (streaming only).
  Outbox& outbox() { return outbox_; }
  // A complete stream: the end marker if the upstream omitted it.
  void end_stream();
  // "x-llmgate-output-tokens: N\r\nx-llmgate-tps: X\r\n" (what is known).
  std::string trailers() const;
  // Non-streaming: the assembled answer.
  std::string completion() const;

 private:
  class Sink;
  void handle(providers::UpstreamEvent& ev, Clock::time_point now);
  // `ev` for a streaming client, by the API's renderer if it has one.
  void render(const providers::UpstreamEvent& ev);
  // The answer's id (from its first chunk) and finish reasons into the
  // record (rec_.keep_meta: traced requests only).
  void keep_meta(const providers::UpstreamEvent& ev);

  const ClientApi& api_;
  const providers::UpstreamProtocol& protocol_;
  std::unique_ptr<providers::UpstreamStream> translator_;  // null: OpenAI's passthrough
  providers::ChunkPrefix chunk_prefix_;  // the passthrough's: what its chunks share
  const ChatRequest& req_;
  routing::AttemptRecord& rec_;
  const bool streaming_;
  std::unique_ptr<ClientApi::Assembly> assembly_;        // non-streaming only
  std::unique_ptr<ClientApi::StreamRenderer> renderer_;  // streaming, when the API has one
  Outbox outbox_;
  std::optional<failover::Fault> fault_;
  std::string fault_text_;
  bool done_ = false;
  bool saw_finish_ = false;
  bool committed_ = false;
  std::size_t output_events_ = 0;
  std::size_t outputs_ = 0;
  bool speed_sampled_ = false;
  std::optional<double> speed_sample_;
  std::string response_id_;
  bool id_looked_for_ = false;
  std::int64_t next_sequence_ = 0;
  std::optional<StreamTranscript> transcript_;
  ContinuationSplice* splice_ = nullptr;
};

// A chat.completion's (or chunk's) id and its choices' finish reasons into
// `rec` (traced requests).
void keep_answer_meta(const nlohmann::json& answer, routing::AttemptRecord& rec);

// An answer's usage into its attempt's record.
inline void take_usage(routing::AttemptRecord& rec, const providers::Usage& u) {
  rec.input_tokens = u.prompt_tokens;
  rec.output_tokens = u.completion_tokens;
  rec.reasoning_tokens = u.reasoning_tokens;
  rec.cached_input_tokens = u.cached_tokens;
}

// "%.1f", for the ttft and tps headers and trailers.
std::string format_decimal(double v);

}  // namespace llmgate::gateway
