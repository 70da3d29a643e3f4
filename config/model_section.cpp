// models: public model names and their ordered deployments.
#include <algorithm>
#include <string>

#include "config/ascii.h"
#include "config/quoting.h"
#include "config/sections.h"

namespace llmgate::config {
namespace {

// Model names travel in JSON bodies and become metric labels and log fields:
// any printable ASCII except spaces ("gpt-4o", "meta-llama/Llama-3.3-70B").
std::string read_model_name(const ConfigNode& node) {
  std::string name = node.string();
  if (name.empty()) node.fail("must not be empty");
  const bool printable =
      std::all_of(name.begin(), name.end(), [](char c) { return c > 0x20 && c < 0x7f; });
  if (!printable) node.fail("must not contain spaces or control characters, got " + quote(name));
  return name;
}

Price read_price(const ConfigNode& node) {
  Price price;
  node.read_map([&](ConfigMap& m) {
    m.read("input_per_1m", price.input_per_1m, read_non_negative);
    m.read("output_per_1m", price.output_per_1m, read_non_negative);
    m.read("cached_input_per_1m", price.cached_input_per_1m, read_non_negative);
  });
  return price;
}

Operation read_operation(const ConfigNode& node) {
  const std::string& name = node.string();
  for (Operation o : kAllOperations) {
    if (name == to_string(o)) return o;
  }
  node.fail("expected one of chat, responses, embeddings, completions, got " + quote(name));
}

Protocol protocol_of(const std::string& provider, const std::vector<Provider>& providers) {
  for (const auto& p : providers) {
    if (p.name == provider) return p.protocol;
  }
  return Protocol::kOpenAi;
}

Deployment read_deployment(const ConfigNode& node, const std::vector<Provider>& providers,
                           const std::vector<Deployment>& earlier) {
  Deployment deployment;
  node.read_map([&](ConfigMap& m) {
    deployment.provider = read_provider_ref(m.required("provider"), providers);
    deployment.model = read_model_name(m.required("model"));
    deployment.set_id();
    for (const auto& other : earlier) {
      if (other.id() == deployment.id())
        node.fail("duplicate deployment " + quote(deployment.id()));
    }
    m.read("price", deployment.price, read_price);
    m.read("expected_ttft", deployment.expected_ttft, &ConfigNode::duration);
    m.read("expected_tps", deployment.expected_tps, read_tokens_per_second);
    m.read("max_concurrent", deployment.max_concurrent, integer_in<unsigned>(1, 1'000'000));
    m.read("max_queue", deployment.max_queue, integer_in<unsigned>(0, 1'000'000));
    m.read("context_window", deployment.context_window,
           integer_in<std::int64_t>(1'000, 100'000'000));
    if (auto pf = m.optional("prefill_ms_per_1k_tokens")) {
      const double v = pf->number();
      if (!(v >= 0 && v <= 5000)) pf->fail("expected a number of ms from 0 to 5000");
      deployment.prefill_ms_per_1k_tokens = v;
    }
    m.read("stream", deployment.stream, &ConfigNode::boolean);
    if (auto t = m.optional("ttft_timeout")) {
      const std::string text = t->string();
      if (text == "none") {
        deployment.first_token_deadline = false;
      } else if (text.empty() || !is_ascii_digit(text.front())) {
        t->fail("expected a duration (250ms, 2s, 1m) or none, got " + quote(text));
      } else {
        deployment.ttft_timeout = t->duration();
      }
    }
    if (auto cont = m.optional("continuation")) {
      const std::string& name = cont->string();
      const Protocol protocol = protocol_of(deployment.provider, providers);
      bool found = false;
      for (Continuation c : {Continuation::kNone, Continuation::kPrefix,
                             Continuation::kContinueFinalMessage, Continuation::kPrefill}) {
        if (name == to_string(c)) {
          deployment.continuation = c;
          found = true;
        }
      }
      if (!found)
        cont->fail("expected one of none, prefix, continue_final_message, prefill, got " +
                   quote(name));
      const bool openai_way = deployment.continuation == Continuation::kPrefix ||
                              deployment.continuation == Continuation::kContinueFinalMessage;
      if (openai_way && protocol != Protocol::kOpenAi)
        cont->fail(quote(name) + " is a way of OpenAI-compatible servers; the " +
                   to_string(protocol) + " protocol continues with prefill");
      if (deployment.continuation == Continuation::kPrefill && protocol == Protocol::kOpenAi)
        cont->fail(
            "prefill is Anthropic's and Gemini's way; an OpenAI-compatible server continues with "
            "prefix (DeepSeek, Mistral) or continue_final_message (vLLM), and OpenAI's own API "
            "not at all (none)");
    }
    if (auto ops = m.optional("operations")) {
      deployment.operations = 0;
      for (const auto& item : ops->items()) {
        const Operation o = read_operation(item);
        if (deployment.serves(o)) item.fail("listed twice");
        deployment.operations |= operation_bit(o);
      }
      if (deployment.operations == 0) ops->fail("must list at least one operation");
      const Protocol protocol = protocol_of(deployment.provider, providers);
      if (deployment.operations != operation_bit(Operation::kChat) &&
          protocol != Protocol::kOpenAi) {
        ops->fail(std::string("only chat is served through the ") + to_string(protocol) +
                  " protocol (the others need an OpenAI-compatible provider)");
      }
    }
  });
  if (deployment.max_queue > 0 && !deployment.max_concurrent) {
    node.fail("max_queue needs max_concurrent");
  }
  return deployment;
}

std::vector<Deployment> read_deployments(const ConfigNode& node,
                                         const std::vector<Provider>& providers) {
  std::vector<Deployment> deployments;
  bool failed = false;
  for (const auto& item : node.items()) {
    failed |=
        !recover([&] { deployments.push_back(read_deployment(item, providers, deployments)); });
  }
  if (deployments.empty() && !failed) node.fail("must list at least one deployment");
  return deployments;
}

Model read_model(const ConfigNode& node, const std::vector<Provider>& providers,
                 const RoutingPolicy& defaults, const std::vector<Model>& earlier) {
  Model model;
  model.routing = defaults;
  node.read_map([&](ConfigMap& m) {
    const ConfigNode name = m.required("name");
    model.name = read_model_name(name);
    recover([&] {  // the rest of the entry is still worth checking
      for (const auto& other : earlier) {
        if (other.name == model.name) name.fail("duplicate model name " + quote(model.name));
      }
    });
    model.deployments = read_deployments(m.required("deployments"), providers);
    if (auto routing = m.optional("routing")) {
      model.routing = read_routing_policy(*routing, defaults, providers);
    }
  });
  return model;
}

}  // namespace

const char* to_string(Operation o) {
  switch (o) {
    case Operation::kChat:
      return "chat";
    case Operation::kResponses:
      return "responses";
    case Operation::kEmbeddings:
      return "embeddings";
    case Operation::kCompletions:
      return "completions";
  }
  return "unknown";
}

const char* to_string(Continuation c) {
  switch (c) {
    case Continuation::kNone:
      return "none";
    case Continuation::kPrefix:
      return "prefix";
    case Continuation::kContinueFinalMessage:
      return "continue_final_message";
    case Continuation::kPrefill:
      return "prefill";
  }
  return "none";
}

const char* gen_ai_name(Operation o) {
  return o == Operation::kCompletions ? "text_completion" : to_string(o);
}

const char* endpoint_of(Operation o) {
  switch (o) {
    case Operation::kChat:
      return "/v1/chat/completions";
    case Operation::kResponses:
      return "/v1/responses";
    case Operation::kEmbeddings:
      return "/v1/embeddings";
    case Operation::kCompletions:
      return "/v1/completions";
  }
  return "";
}

double read_non_negative(const ConfigNode& node) {
  const double value = node.number();
  if (value < 0) node.fail("must not be negative");
  return value;
}

std::vector<Model> read_models(const ConfigNode& node, const std::vector<Provider>& providers,
                               const RoutingPolicy& defaults) {
  std::vector<Model> models;
  for (const auto& item : node.items()) {
    if (!recover([&] { models.push_back(read_model(item, providers, defaults, models)); })) {
      definition_failed(item, "model");
    }
  }
  return models;
}

std::string read_provider_ref(const ConfigNode& node, const std::vector<Provider>& providers) {
  std::string name = node.string();
  if (is_failed_definition("provider", name)) throw AlreadyReported();
  std::vector<std::string> known;
  for (const auto& provider : providers) {
    if (provider.name == name) return name;
    known.push_back(provider.name);
  }
  std::string message = "unknown provider " + quote(name);
  if (auto hint = closest_match(name, known)) message += " (did you mean " + quote(*hint) + "?)";
  node.fail(message);
}

double read_tokens_per_second(const ConfigNode& node) {
  const double tps = node.number();
  if (tps <= 0) node.fail("must be greater than zero");
  return tps;
}

}  // namespace llmgate::config
