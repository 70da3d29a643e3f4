// llmgate-sim: command line front end of SimServer. See README.md.
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "tools/sim/sim_server.h"

namespace {

using llmgate::sim::Profile;
using llmgate::sim::SimOptions;
using nlohmann::json;

constexpr std::string_view kUsage = R"(usage: llmgate-sim [options]

A simulated LLM provider: OpenAI chat completions (.../chat/completions),
Anthropic Messages (.../messages), Gemini (.../models/M:generateContent,
:streamGenerateContent[?alt=sse]) and Amazon Bedrock's Converse API
(/model/M/converse[-stream], AWS event-stream framing), with scripted latency,
speed and faults.

options:
  --listen ADDR:PORT     address to listen on (default 127.0.0.1:0, 0 = any free port)
  --threads N            I/O threads (default 1; one core serves thousands of streams)
  --seed N               random seed for TTFT, speed, length and errors (default 1)
  --region R             region echoed in x-sim-region for profiles without one
  --api-key K            require K on model requests: "Authorization: Bearer K" (OpenAI),
                         x-api-key (Anthropic), x-goog-api-key or ?key= (Gemini)
  --azure API_VERSION    behave like Azure OpenAI: /openai/deployments/{name}/chat/completions
                         ?api-version=API_VERSION, the key (if any) in an api-key header
  --aws-key ID:SECRET    Bedrock requests must be signed (AWS Signature Version 4) with this
                         access key and secret: a wrong signature is AWS's 403
  --require-token        model requests need a live token from the token endpoints below
                         (Authorization: Bearer; Vertex AI, Azure OpenAI with Entra ID)
  --token-lifetime S     tokens (and STS credentials) live S seconds (default 3600)
  --google-service-account FILE
                         POST /token accepts JWTs signed by this key file's account only
  --entra-secret S       POST /{tenant}/oauth2/v2.0/token accepts this client secret
  --entra-federated-token T
                         ... and this federated token as the client assertion
  --aws-web-identity-token T
                         POST / (STS AssumeRoleWithWebIdentity) accepts this token; Bedrock
                         requests may be signed with the temporary credentials it issues
  --aws-container-token T
                         serve GET /v1/credentials (the ECS / EKS Pod Identity container
                         credentials endpoint) to requests whose Authorization is T
  --aws-instance-role R  serve EC2 instance metadata (IMDSv2: PUT /latest/api/token, then
                         /latest/meta-data/iam/security-credentials/R) with R's credentials
  --profiles FILE        YAML or JSON: {default: {...}, models: {NAME: {...}}}
  --model NAME=JSON      profile for one model, merged over the default (repeatable)
  --port-file PATH       write the bound port to PATH (atomically) once listening
  --stamp-events         put "x_sim_ns":<CLOCK_MONOTONIC ns> last in each streamed OpenAI
                         chunk as it is written (benchmarks: event delay through a proxy)
  --help                 show this help

A profile is JSON/YAML with keys ttft_ms, tps, output_tokens, error_rate,
error_status, retry_after_s, stall_before_first_token_ms, stall_after_tokens,
stall_ms, cut_after_tokens, malformed_after_tokens, error_after_tokens,
fault_rate, region, output, reasoning_tokens, reasoning_hidden, reasoning_field,
annotations, cached_tokens, ratelimit_headers, reject_stream_options,
reject_stream, refuse_prefill, safety_block. See README.md.
)";

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <typename T>
T parse_number(std::string_view flag, std::string_view text) {
  T value{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    throw UsageError(std::string(flag) + ": not a number: " + std::string(text));
  }
  return value;
}

void parse_listen(std::string_view text, SimOptions& options) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos) throw UsageError("--listen: expected ADDR:PORT");
  std::string_view host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);  // [::1]:8080
  }
  if (host.empty()) throw UsageError("--listen: empty address");
  options.address = std::string(host);
  options.port = parse_number<std::uint16_t>("--listen", text.substr(colon + 1));
}

// YAML 1.2 core schema for plain scalars; quoted scalars stay strings.
json scalar_to_json(const YAML::Node& node) {
  const std::string& s = node.Scalar();
  if (node.Tag() == "!") return s;
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  std::int64_t i = 0;
  const char* first = s.data() + (s.front() == '+' ? 1 : 0);
  if (auto [end, ec] = std::from_chars(first, s.data() + s.size(), i);
      ec == std::errc() && end == s.data() + s.size()) {
    return i;
  }
  double d = 0;
  if (auto [end, ec] = std::from_chars(first, s.data() + s.size(), d);
      ec == std::errc() && end == s.data() + s.size()) {
    return d;
  }
  return s;
}

json yaml_to_json(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar:
      return scalar_to_json(node);
    case YAML::NodeType::Sequence: {
      json a = json::array();
      for (const auto& item : node) a.push_back(yaml_to_json(item));
      return a;
    }
    case YAML::NodeType::Map: {
      json o = json::object();
      for (const auto& kv : node) o[kv.first.as<std::string>()] = yaml_to_json(kv.second);
      return o;
    }
  }
  return nullptr;
}

Profile read_profile(const json& j, const Profile& base, const std::string& where) {
  try {
    return llmgate::sim::profile_from_json(j, base);
  } catch (const std::invalid_argument& e) {
    throw UsageError(where + "." + e.what());
  }
}

void load_profiles_file(const std::string& path, SimOptions& options) {
  json doc;
  try {
    doc = yaml_to_json(YAML::LoadFile(path));
  } catch (const YAML::BadFile&) {
    throw UsageError(path + ": cannot read the file");
  } catch (const YAML::Exception& e) {
    throw UsageError(path + ": " + e.what());
  }
  if (doc.is_null()) return;  // an empty file is an empty configuration
  if (!doc.is_object()) throw UsageError(path + ": expected a map {default, models}");
  for (const auto& [key, value] : doc.items()) {
    if (key == "default") {
      options.default_profile = read_profile(value, options.default_profile, path + ": default");
    } else if (key == "models") {
      if (!value.is_object())
        throw UsageError(path + ": models: expected a map of name -> profile");
    } else {
      throw UsageError(path + ": unknown key \"" + key + "\" (expected default, models)");
    }
  }
  // Model profiles are partial and merge over the default, whatever the key order.
  if (auto models = doc.find("models"); models != doc.end()) {
    for (const auto& [model, profile] : models->items()) {
      options.profiles[model] =
          read_profile(profile, options.default_profile, path + ": models." + model);
    }
  }
}

void add_model_flag(std::string_view text, SimOptions& options) {
  const auto eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0) throw UsageError("--model: expected NAME=JSON");
  const std::string model(text.substr(0, eq));
  const json j = json::parse(text.substr(eq + 1), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw UsageError("--model " + model + ": not valid JSON");
  auto it = options.profiles.find(model);
  const Profile& base = it != options.profiles.end() ? it->second : options.default_profile;
  options.profiles[model] = read_profile(j, base, "--model " + model + ": profile");
}

struct Cli {
  SimOptions options;
  std::string port_file;
  bool help = false;
};

Cli parse_cli(int argc, char** argv) {
  Cli cli;
  std::string profiles_file;
  std::vector<std::string> model_flags;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      cli.help = true;
      return cli;
    }
    if (arg == "--stamp-events") {
      cli.options.stamp_events = true;
      continue;
    }
    if (arg == "--require-token") {
      cli.options.tokens.require = true;
      continue;
    }
    static constexpr std::string_view kFlags[] = {"--listen",
                                                  "--threads",
                                                  "--seed",
                                                  "--region",
                                                  "--api-key",
                                                  "--profiles",
                                                  "--model",
                                                  "--port-file",
                                                  "--azure",
                                                  "--aws-key",
                                                  "--token-lifetime",
                                                  "--google-service-account",
                                                  "--entra-secret",
                                                  "--entra-federated-token",
                                                  "--aws-web-identity-token",
                                                  "--aws-container-token",
                                                  "--aws-instance-role"};
    const std::string_view name = arg.substr(0, arg.find('='));
    if (std::find(std::begin(kFlags), std::end(kFlags), name) == std::end(kFlags)) {
      throw UsageError("unknown option " + std::string(name));
    }
    std::string_view value;
    if (name.size() < arg.size()) {
      value = arg.substr(name.size() + 1);  // --flag=value (--model=NAME=JSON too)
      arg = name;
    } else {
      if (i + 1 >= argc) throw UsageError(std::string(arg) + ": missing value");
      value = argv[++i];
    }
    if (arg == "--listen") {
      parse_listen(value, cli.options);
    } else if (arg == "--threads") {
      cli.options.threads = parse_number<unsigned>(arg, value);
      if (cli.options.threads == 0 || cli.options.threads > 256) {
        throw UsageError("--threads: expected 1..256");
      }
    } else if (arg == "--seed") {
      cli.options.seed = parse_number<std::uint64_t>(arg, value);
    } else if (arg == "--region") {
      cli.options.region = std::string(value);
    } else if (arg == "--api-key") {
      cli.options.api_key = std::string(value);
    } else if (arg == "--profiles") {
      profiles_file = std::string(value);
    } else if (arg == "--model") {
      model_flags.emplace_back(value);
    } else if (arg == "--azure") {
      if (value.empty()) throw UsageError("--azure: expected an api-version, e.g. 2024-10-21");
      cli.options.azure_api_version = std::string(value);
    } else if (arg == "--aws-key") {
      const auto colon = value.find(':');
      if (colon == std::string_view::npos || colon == 0 || colon + 1 == value.size())
        throw UsageError("--aws-key: expected ACCESS_KEY_ID:SECRET_ACCESS_KEY");
      cli.options.aws_access_key_id = std::string(value.substr(0, colon));
      cli.options.aws_secret_access_key = std::string(value.substr(colon + 1));
    } else if (arg == "--token-lifetime") {
      const auto seconds = parse_number<unsigned>(arg, value);
      if (seconds == 0 || seconds > 86400) throw UsageError("--token-lifetime: expected 1..86400");
      cli.options.tokens.lifetime = std::chrono::seconds(seconds);
    } else if (arg == "--google-service-account") {
      std::ifstream in{std::string(value)};
      std::stringstream text;
      text << in.rdbuf();
      if (!in) throw UsageError("--google-service-account: cannot read " + std::string(value));
      cli.options.tokens.google_service_account_json = text.str();
    } else if (arg == "--entra-secret") {
      cli.options.tokens.entra_client_secret = std::string(value);
    } else if (arg == "--entra-federated-token") {
      cli.options.tokens.entra_federated_token = std::string(value);
    } else if (arg == "--aws-web-identity-token") {
      cli.options.tokens.aws_web_identity_token = std::string(value);
    } else if (arg == "--aws-container-token") {
      cli.options.tokens.aws_container_token = std::string(value);
    } else if (arg == "--aws-instance-role") {
      cli.options.tokens.aws_instance_role = std::string(value);
    } else if (arg == "--port-file") {
      cli.port_file = std::string(value);
    }
  }
  // The file first, so --model flags refine what it says.
  if (!profiles_file.empty()) load_profiles_file(profiles_file, cli.options);
  for (const auto& flag : model_flags) add_model_flag(flag, cli.options);
  return cli;
}

// Readers poll for the file: they must never see it half-written.
void write_port_file(const std::string& path, std::uint16_t port) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << port << '\n';
    if (!out.flush()) throw std::runtime_error("cannot write " + tmp);
  }
  std::filesystem::rename(tmp, path);
}

// Thousands of concurrent streams need thousands of descriptors.
void raise_fd_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Cli cli;
  try {
    cli = parse_cli(argc, argv);
  } catch (const UsageError& e) {
    std::cerr << "llmgate-sim: " << e.what() << "\n(see llmgate-sim --help)\n";
    return 2;
  }
  if (cli.help) {
    std::cout << kUsage;
    return 0;
  }

  // Block the stop signals before any thread starts, so every I/O thread
  // inherits the mask and only sigwait() below sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  raise_fd_limit();

  const std::string address = cli.options.address;
  try {
    llmgate::sim::SimServer server(std::move(cli.options));
    const std::uint16_t port = server.start();
    const bool v6 = address.find(':') != std::string::npos;
    std::cout << "llmgate-sim listening on " << (v6 ? "[" : "") << address << (v6 ? "]" : "") << ":"
              << port << std::endl;
    if (!cli.port_file.empty()) write_port_file(cli.port_file, port);

    int signal = 0;
    sigwait(&stop_signals, &signal);
    std::cerr << "llmgate-sim: " << (signal == SIGINT ? "SIGINT" : "SIGTERM") << ", stopping\n";
    server.stop();
  } catch (const std::exception& e) {
    std::cerr << "llmgate-sim: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
