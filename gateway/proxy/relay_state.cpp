#include "gateway/proxy/relay_state.h"

#include <algorithm>
#include <charconv>
#include <utility>

#include "config/decimal.h"

namespace llmgate::gateway {

std::string format_decimal(double v) { return config::fixed(v, 1); }

RelayState::RelayState(const ClientApi& api, const providers::UpstreamProtocol& protocol,
                       const ChatRequest& req, routing::AttemptRecord& rec,
                       const providers::UpstreamRequest* upstream)
    : api_(api), protocol_(protocol), req_(req), rec_(rec), streaming_(req.stream) {
  if (streaming_)
    renderer_ = api_.renderer(protocol_, req_);
  else
    assembly_ = api_.assembly(protocol_);
  // OpenAI's events pass through classify() alone (no translator, no
  // allocation); other protocols translate, with state across events.
  if (!protocol_.passthrough()) {
    providers::UpstreamRequest defaults;
    translator_ = protocol_.open_stream(upstream ? *upstream : defaults);
  }
}

// The translator's events, each handled as it comes (its views live only
// for the call).
class RelayState::Sink final : public providers::UpstreamStream::Sink {
 public:
  Sink(RelayState& state, Clock::time_point now) : state_(state), now_(now) {}
  void on(providers::UpstreamEvent& ev) override {
    if (!state_.stopped()) state_.handle(ev, now_);
  }

 private:
  RelayState& state_;
  Clock::time_point now_;
};

void RelayState::on_event(const providers::Frame& raw, Clock::time_point now) {
  if (stopped()) return;
  if (translator_) {
    Sink sink(*this, now);
    translator_->translate(raw, sink);
    return;
  }
  providers::UpstreamEvent ev = protocol_.classify(raw, chunk_prefix_);
  handle(ev, now);
}

void RelayState::on_body_end(Clock::time_point now) {
  if (stopped() || !translator_) return;
  Sink sink(*this, now);
  translator_->end(sink);
}

void RelayState::handle(providers::UpstreamEvent& ev, Clock::time_point now) {
  using Kind = providers::UpstreamEvent::Kind;
  switch (ev.kind) {
    case Kind::kKeepAlive:
      if (streaming_) render(ev);
      return;
    case Kind::kDone:
      done_ = true;
      if (streaming_) render(ev);
      return;
    case Kind::kError:
      fault_ = failover::Fault::kInBandError;
      fault_text_ = std::move(ev.message);
      return;
    case Kind::kMalformed:
      fault_ = failover::Fault::kMalformedEvent;
      fault_text_ = std::move(ev.message);
      return;
    case Kind::kData:
      break;
  }
  if (!ev.response_id.empty()) response_id_ = std::move(ev.response_id);
  const providers::ChatChunk& ch = ev.chunk;
  if (ch.usage) take_usage(rec_, *ch.usage);
  if (ch.has_reasoning) rec_.reasoning_streamed = true;
  if (api_.is_first_token(ev)) {
    if (!rec_.first_token) rec_.first_token = now;
    rec_.last_token = now;
    ++outputs_;
    rec_.output_chars += static_cast<std::int64_t>(ch.output_chars);
    if (!speed_sampled_ && ++output_events_ >= kSpeedSampleEvents &&
        now - *rec_.first_token >= kSpeedSampleAfter) {
      speed_sampled_ = true;
      const double span = std::chrono::duration<double>(now - *rec_.first_token).count();
      speed_sample_ = static_cast<double>(rec_.output_chars) / span;
    }
  }
  saw_finish_ = saw_finish_ || ch.has_finish;
  if (rec_.keep_meta) keep_meta(ev);
  if (streaming_) {
    next_sequence_ = ev.sequence_number >= 0 ? std::max(next_sequence_, ev.sequence_number + 1)
                                             : next_sequence_ + 1;
    if (splice_) {
      splice_->render(ev, outbox_);
      return;
    }
    if (transcript_) transcript_->add(ev);
    render(ev);
  } else
    assembly_->add(ev);
}

namespace {

void add_finish_reason(routing::AttemptRecord& rec, std::string reason) {
  if (rec.finish_reasons.size() < 16) rec.finish_reasons.push_back(std::move(reason));
}

}  // namespace

void keep_answer_meta(const nlohmann::json& answer, routing::AttemptRecord& rec) {
  if (!answer.is_object()) return;
  if (auto id = answer.find("id"); rec.response_id.empty() && id != answer.end() && id->is_string())
    rec.response_id = id->get<std::string>().substr(0, 256);
  auto choices = answer.find("choices");
  if (choices == answer.end() || !choices->is_array()) return;
  for (const auto& c : *choices) {
    if (!c.is_object()) continue;
    if (auto fr = c.find("finish_reason"); fr != c.end() && fr->is_string())
      add_finish_reason(rec, fr->get<std::string>().substr(0, 64));
  }
}

void RelayState::keep_meta(const providers::UpstreamEvent& ev) {
  const providers::ChatChunk& ch = ev.chunk;
  // A Responses stream names its response in its events.
  if (rec_.response_id.empty() && !response_id_.empty()) rec_.response_id = response_id_;
  // The id from the first chunk only; then only the finishing chunks.
  const bool want_id = !std::exchange(id_looked_for_, true) && rec_.response_id.empty();
  if (!want_id && !ch.has_finish) return;
  // A plain chunk has the views: strings still escaped (ids and reasons
  // need no escapes; one that has them is taken from the parsed chunk).
  auto plain_string = [](std::string_view v) {
    return v.size() >= 2 && v.front() == '"' && v.back() == '"' &&
           v.find('\\') == std::string_view::npos;
  };
  const bool id_here = want_id && (ch.meta_keys & providers::ChatChunk::kMetaId);
  if (ch.plain && (!id_here || plain_string(ch.meta[0])) &&
      ch.finish_reason.find('\\') == std::string_view::npos) {
    if (id_here)
      rec_.response_id =
          std::string(ch.meta[0].substr(1, std::min<std::size_t>(ch.meta[0].size() - 2, 256)));
    if (ch.has_finish_reason && ch.has_finish)
      add_finish_reason(rec_, std::string(ch.finish_reason.substr(0, 64)));
    return;
  }
  // Anything else (tool calls, several choices, escapes): parsed, once per
  // attempt and per finishing chunk.
  if (!ch.json.is_null()) {
    keep_answer_meta(ch.json, rec_);
  } else if (!ev.data.empty()) {
    keep_answer_meta(providers::parse_chunk(ev.data).json, rec_);
  }
}

void RelayState::on_event_too_large() {
  if (!stopped()) fault_ = failover::Fault::kEventTooLarge;
}

void RelayState::on_malformed_frame(std::string_view why) {
  if (stopped()) return;
  fault_ = failover::Fault::kMalformedEvent;
  fault_text_ = why;
}

void RelayState::render(const providers::UpstreamEvent& ev) {
  if (renderer_)
    renderer_->render(ev, outbox_);
  else
    api_.render(ev, req_, outbox_);
}

void RelayState::end_stream() {
  if (done_) return;
  // Finished cleanly, the upstream omitted its end marker.
  if (renderer_)
    renderer_->end(outbox_);
  else
    outbox_.copy(api_.stream_end());
}

std::string RelayState::trailers() const {
  std::string t;
  t.reserve(96);  // both lines: one allocation
  if (rec_.output_tokens) {
    char digits[24];
    const auto r = std::to_chars(digits, digits + sizeof digits, *rec_.output_tokens);
    t.append("x-llmgate-output-tokens: ").append(digits, r.ptr).append("\r\n");
  }
  if (auto tps = rec_.tps()) {
    t.append("x-llmgate-tps: ");
    config::append_fixed(t, *tps, 1);
    t.append("\r\n");
  }
  return t;
}

std::string RelayState::completion() const { return assembly_ ? assembly_->body() : std::string(); }

}  // namespace llmgate::gateway
