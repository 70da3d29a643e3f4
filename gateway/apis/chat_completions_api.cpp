// POST /v1/chat/completions as a client API: events pass through as they
// came (the usage the client did not ask for removed), [DONE] ends a stream,
// a non-streamed answer is one chat.completion.
#include "gateway/apis/client_api.h"
#include "providers/completion_assembler.h"

namespace llmgate::gateway {
namespace {

class ChatAssembly final : public ClientApi::Assembly {
 public:
  void add(const providers::UpstreamEvent& ev) override {
    if (ev.kind != providers::UpstreamEvent::Kind::kData) return;
    // The usual chunks (role, content, finish, usage) are taken unparsed.
    if (ev.chunk.plain)
      assembler_.add_plain(ev.chunk);
    else
      assembler_.add(providers::parse_chunk(ev.data).json);
  }
  std::string body() const override { return assembler_.body(); }

 private:
  providers::CompletionAssembler assembler_;
};

// Frames `data` as one SSE event.
void event(Outbox& out, std::string_view data) {
  out.reserve(data.size() + 8);
  out.copy("data: ");
  out.copy(data);
  out.copy("\n\n");
}

class ChatCompletions final : public ClientApi {
 public:
  std::string_view name() const override { return "chat.completions"; }
  config::Operation operation() const override { return config::Operation::kChat; }

  std::variant<ChatRequest, ApiError> parse(std::string_view content_type,
                                            std::string body) const override {
    return parse_chat_request(content_type, std::move(body));
  }

  void render(const providers::UpstreamEvent& ev, const ChatRequest& req,
              Outbox& out) const override {
    render_openai_chunk(ev, req, out);
  }

  std::string_view stream_end() const override { return "data: [DONE]\n\n"; }

  std::string stream_of_answer(const nlohmann::json& answer,
                               const ChatRequest& req) const override {
    return providers::stream_of_completion(answer, req.include_usage);
  }

  std::unique_ptr<Assembly> assembly() const override { return std::make_unique<ChatAssembly>(); }
};

}  // namespace

void render_openai_chunk(const providers::UpstreamEvent& ev, const ChatRequest& req, Outbox& out) {
  if (render_openai_control(ev, out)) return;
  if (!req.include_usage && ev.chunk.usage) {
    if (ev.chunk.usage_only) return;  // the usage chunk the client did not ask for
    // Usage riding on a content or finish chunk: spliced out (the rest of
    // the chunk's text as it came), in place when the chunk reads plainly.
    providers::KeptMembers kept;
    if (providers::kept_members(ev.data, "usage", kept)) {
      std::size_t size = 10;  // "data: {", "}\n\n"
      for (std::size_t i = 0; i < kept.count; ++i) size += kept.text[i].size() + 1;
      out.reserve(size);
      out.copy("data: {");
      for (std::size_t i = 0; i < kept.count; ++i) {
        if (i) out.copy(",");
        out.copy(kept.text[i]);
      }
      out.copy("}\n\n");
      return;
    }
    auto chunk = providers::RequestBody::parse(std::string(ev.data));
    if (auto* c = std::get_if<providers::RequestBody>(&chunk))
      event(out, c->spliced({}, {"usage"}));
    return;
  }
  if (ev.raw.empty())
    event(out, ev.data);  // translated by the protocol
  else
    out.view(ev.raw);
}

const ClientApi& chat_completions_api() {
  static const ChatCompletions api;
  return api;
}

}  // namespace llmgate::gateway
