// Upstream credentials per provider (upstream_credentials.h).
#include "gateway/proxy/upstream_credentials.h"

#include "config/rfc3339.h"
#include "gateway/observe/log.h"

namespace llmgate::gateway {
CredentialCell::CredentialCell(std::string provider,
                               std::optional<providers::cloud::TokenSource> source)
    : provider_(std::move(provider)), source_(std::move(source)) {
  if (source_) description_ = source_->description;
}

CredentialCell::CredentialCell(std::string provider, providers::cloud::Credential fixed,
                               std::string source)
    : CredentialCell(std::move(provider), std::nullopt) {
  current_ = std::make_shared<const providers::cloud::Credential>(std::move(fixed));
  description_ = std::move(source);
  settled_ = true;
}

CredentialCell::CredentialCell(std::string provider, providers::cloud::TokenSource source)
    : CredentialCell(std::move(provider),
                     std::optional<providers::cloud::TokenSource>(std::move(source))) {}

std::shared_ptr<CredentialCell> CredentialCell::unavailable(std::string provider, std::string why) {
  auto cell =
      std::shared_ptr<CredentialCell>(new CredentialCell(std::move(provider), std::nullopt));
  cell->error_ = std::move(why);
  cell->settled_ = true;
  return cell;
}

CredentialCell::Current CredentialCell::current(SystemClock::time_point now) const {
  std::lock_guard lock(mu_);
  if (current_ && now < current_->expires) return current_;
  if (current_) {
    return "the credential from " + description_ + " expired at " +
           config::format_rfc3339_utc(current_->expires) +
           (error_.empty() ? std::string(" and is being refreshed")
                           : "; refreshing it failed: " + error_);
  }
  if (!error_.empty())
    return "no credential" + (description_.empty() ? "" : " from " + description_) + ": " + error_;
  return "no credential from " + description_ + " yet (being fetched)";
}

void CredentialCell::store(providers::cloud::Credential c) {
  {
    std::lock_guard lock(mu_);
    current_ = std::make_shared<const providers::cloud::Credential>(std::move(c));
    error_.clear();
  }
  settled_.store(true, std::memory_order_release);
}

void CredentialCell::failed(std::string why) {
  {
    std::lock_guard lock(mu_);
    error_ = std::move(why);
  }
  settled_.store(true, std::memory_order_release);
}

UpstreamCredentials upstream_credentials(const config::Config& cfg,
                                         const UpstreamCredentials* previous,
                                         const providers::cloud::Getenv& env,
                                         const providers::cloud::ReadFile& read) {
  UpstreamCredentials out;
  // A refreshed source the previous snapshot had for this provider: its cell.
  auto refreshed = [&](const std::string& name, providers::cloud::TokenSource source) {
    if (previous) {
      if (auto it = previous->find(name); it != previous->end() && it->second->source() == source) {
        return it->second;
      }
    }
    log_line(LogLevel::kInfo, "provider " + name + ": credentials from " + source.description +
                                  ", refreshed by the gateway");
    return std::make_shared<CredentialCell>(name, std::move(source));
  };
  for (const auto& p : cfg.providers) {
    if (auto source = providers::cloud::token_source(p)) {
      out.emplace(p.name, refreshed(p.name, std::move(*source)));
      continue;
    }
    if (p.protocol != config::Protocol::kBedrock || !p.api_key.empty()) continue;
    auto resolved = providers::cloud::resolve_aws_credentials(p.aws_profile, env, read);
    if (resolved.found) {
      log_line(LogLevel::kInfo, "provider " + p.name + ": AWS credentials from " +
                                    resolved.found->source + " (region " + p.aws_region + ")");
      providers::cloud::Credential c;
      c.aws = resolved.found->credentials;
      c.expires = c.aws->expires;
      out.emplace(p.name,
                  std::make_shared<CredentialCell>(p.name, std::move(c), resolved.found->source));
      continue;
    }
    // The chain's next links: web identity (EKS IRSA) through STS, then the
    // container credentials endpoint (ECS task roles, EKS Pod Identity).
    std::string why = resolved.error;
    if (p.aws_profile.empty()) {
      if (auto w = providers::cloud::web_identity_from_environment(env)) {
        out.emplace(p.name, refreshed(p.name, providers::cloud::aws_web_identity_source(
                                                  *w, p.aws_region,
                                                  env("AWS_ENDPOINT_URL_STS").value_or(""))));
        continue;
      }
      std::string error;
      if (auto c = providers::cloud::container_credentials_from_environment(env, &error)) {
        out.emplace(p.name, refreshed(p.name, providers::cloud::aws_container_source(*c)));
        continue;
      }
      if (!error.empty()) why += "; " + error;
      // The last link: the EC2 instance profile, from instance metadata
      // (unless AWS_EC2_METADATA_DISABLED says there is none to ask).
      if (error.empty() && env("AWS_EC2_METADATA_DISABLED").value_or("") != "true") {
        out.emplace(p.name, refreshed(p.name, providers::cloud::aws_instance_source(
                                                  env("AWS_EC2_METADATA_SERVICE_ENDPOINT")
                                                      .value_or("http://169.254.169.254"))));
        continue;
      }
    }
    log_line(LogLevel::kWarn, "provider " + p.name + ": " + why);
    out.emplace(p.name, CredentialCell::unavailable(p.name, why));
  }
  return out;
}

std::variant<std::shared_ptr<const providers::cloud::Credential>, std::string> credential_for(
    const UpstreamCredentials& all, const config::Provider& provider, SystemClock::time_point now) {
  const auto it = all.find(provider.name);
  if (it == all.end()) return std::shared_ptr<const providers::cloud::Credential>();
  return it->second->current(now);
}

}  // namespace llmgate::gateway
