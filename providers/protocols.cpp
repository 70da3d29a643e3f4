// The protocol a provider speaks (providers[].protocol).
#include "providers/upstream_protocol.h"

namespace llmgate::providers {

const UpstreamProtocol& protocol_for(const config::Provider& p) {
  switch (p.protocol) {
    case config::Protocol::kAnthropic:
      return anthropic_on_vertex(p) ? anthropic_vertex_protocol() : anthropic_protocol();
    case config::Protocol::kGemini:
      return gemini_protocol();
    case config::Protocol::kBedrock:
      return bedrock_protocol();
    case config::Protocol::kOpenAi:
      break;
  }
  return openai_chat_protocol();
}

const UpstreamProtocol* protocol_for(const config::Provider& p, config::Operation op) {
  if (op == config::Operation::kChat) return &protocol_for(p);
  if (p.protocol != config::Protocol::kOpenAi) return nullptr;
  switch (op) {
    case config::Operation::kResponses:
      return &openai_responses_protocol();
    case config::Operation::kEmbeddings:
      return &openai_embeddings_protocol();
    case config::Operation::kCompletions:
      return &openai_completions_protocol();
    case config::Operation::kChat:
      break;
  }
  return &protocol_for(p);
}

}  // namespace llmgate::providers
