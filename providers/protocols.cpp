// The protocol a provider speaks (providers[].protocol).
#include "providers/upstream_protocol.h"

namespace llmgate::providers {

const UpstreamProtocol& protocol_for(const config::Provider& p) {
  switch (p.protocol) {
    case config::Protocol::kAnthropic:
      return anthropic_protocol();
    case config::Protocol::kGemini:
      return gemini_protocol();
    case config::Protocol::kOpenAi:
      break;
  }
  return openai_chat_protocol();
}

}  // namespace llmgate::providers
