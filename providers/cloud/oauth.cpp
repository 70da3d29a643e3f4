// Short-lived credentials from token endpoints (oauth.h).
#include "providers/cloud/oauth.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <algorithm>
#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>

#include "config/percent.h"
#include "config/rfc3339.h"

namespace llmgate::providers::cloud {
namespace {

using json = nlohmann::json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// The string member `key`, else "" (a member of another type included).
std::string text(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::int64_t unix_seconds(SystemClock::time_point t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

using PemKey = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;

// The key a PEM text holds: its private key, or (`or_public`) a public one.
PemKey read_pem_key(std::string_view pem, bool or_public) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(
      BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
  EVP_PKEY* key = nullptr;
  if (bio) {
    key = !or_public || pem.find("PRIVATE KEY") != std::string_view::npos
              ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr)
              : PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr);
  }
  return PemKey(key, EVP_PKEY_free);
}

// RSASSA-PKCS1-v1_5 with SHA-256 of `data` by the PEM key; empty on failure.
std::string rs256(std::string_view pem, std::string_view data, std::string* error) {
  const PemKey key = read_pem_key(pem, /*or_public=*/false);
  if (!key) {
    if (error) *error = "the service account's private_key is not a PEM private key";
    return {};
  }
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  std::size_t len = 0;
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key.get()) != 1 ||
      EVP_DigestSign(ctx.get(), nullptr, &len, reinterpret_cast<const unsigned char*>(data.data()),
                     data.size()) != 1) {
    if (error) *error = "the service account's private_key cannot sign (RS256)";
    return {};
  }
  std::string sig(len, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len,
                     reinterpret_cast<const unsigned char*>(data.data()), data.size()) != 1) {
    if (error) *error = "the service account's private_key cannot sign (RS256)";
    return {};
  }
  sig.resize(len);
  return sig;
}

// The text of the first <name>...</name> in `xml` (no nesting, no
// entities: STS's credential fields are plain), or nullopt.
std::optional<std::string> xml_text(std::string_view xml, std::string_view name) {
  const std::string open = "<" + std::string(name) + ">";
  const std::string close = "</" + std::string(name) + ">";
  const std::size_t at = xml.find(open);
  if (at == std::string_view::npos) return std::nullopt;
  const std::size_t from = at + open.size();
  const std::size_t to = xml.find(close, from);
  if (to == std::string_view::npos) return std::nullopt;
  return std::string(xml.substr(from, to - from));
}

std::string form(std::initializer_list<std::pair<std::string_view, std::string_view>> fields) {
  std::string out;
  for (const auto& [name, value] : fields) {
    if (!out.empty()) out += '&';
    out.append(form_encode(name)).append("=").append(form_encode(value));
  }
  return out;
}

}  // namespace

std::string base64url(std::string_view bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const auto n = static_cast<unsigned>(static_cast<unsigned char>(bytes[i])) << 16 |
                   static_cast<unsigned>(static_cast<unsigned char>(bytes[i + 1])) << 8 |
                   static_cast<unsigned>(static_cast<unsigned char>(bytes[i + 2]));
    out += kAlphabet[n >> 18 & 63];
    out += kAlphabet[n >> 12 & 63];
    out += kAlphabet[n >> 6 & 63];
    out += kAlphabet[n & 63];
  }
  if (i < bytes.size()) {
    unsigned n = static_cast<unsigned>(static_cast<unsigned char>(bytes[i])) << 16;
    if (i + 1 < bytes.size())
      n |= static_cast<unsigned>(static_cast<unsigned char>(bytes[i + 1])) << 8;
    out += kAlphabet[n >> 18 & 63];
    out += kAlphabet[n >> 12 & 63];
    if (i + 1 < bytes.size()) out += kAlphabet[n >> 6 & 63];
  }
  return out;
}

std::optional<std::string> base64url_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size() * 3 / 4);
  unsigned acc = 0;
  int bits = 0;
  for (const char c : text) {
    int v;
    if (c >= 'A' && c <= 'Z') {
      v = c - 'A';
    } else if (c >= 'a' && c <= 'z') {
      v = c - 'a' + 26;
    } else if (c >= '0' && c <= '9') {
      v = c - '0' + 52;
    } else if (c == '-') {
      v = 62;
    } else if (c == '_') {
      v = 63;
    } else {
      return std::nullopt;
    }
    acc = (acc << 6 | static_cast<unsigned>(v)) & 0xffffff;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>(acc >> bits & 0xff);
    }
  }
  // A length no encoding has, or bits left over that are not zero (a
  // second spelling of the same bytes: only the canonical one is read).
  if (bits >= 6 || (acc & ((1u << bits) - 1)) != 0) return std::nullopt;
  return out;
}

std::string form_encode(std::string_view s) { return config::percent_encode(s); }

std::vector<std::pair<std::string, std::string>> form_decode(std::string_view body) {
  std::vector<std::pair<std::string, std::string>> out;
  auto decode = [](std::string_view part) {
    std::string spaced(part);
    for (char& c : spaced) {
      if (c == '+') c = ' ';
    }
    return config::percent_decode(spaced);
  };
  while (!body.empty()) {
    const std::size_t amp = body.find('&');
    const std::string_view field = body.substr(0, amp);
    body = amp == std::string_view::npos ? std::string_view() : body.substr(amp + 1);
    if (field.empty()) continue;
    const std::size_t eq = field.find('=');
    out.emplace_back(decode(field.substr(0, eq)),
                     eq == std::string_view::npos ? std::string() : decode(field.substr(eq + 1)));
  }
  return out;
}

bool rs256_verify(std::string_view pem, std::string_view data, std::string_view signature) {
  const PemKey key = read_pem_key(pem, /*or_public=*/true);
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!key || !ctx ||
      EVP_DigestVerifyInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key.get()) != 1)
    return false;
  return EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()),
                          signature.size(), reinterpret_cast<const unsigned char*>(data.data()),
                          data.size()) == 1;
}

std::variant<ServiceAccount, std::string> parse_service_account(std::string_view json_text) {
  const json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::string("the service account key file is not a JSON object");
  if (text(j, "type") != "service_account") {
    return std::string("the key file is not a service account key (\"type\": \"") +
           text(j, "type") + "\")";
  }
  ServiceAccount sa;
  sa.client_email = text(j, "client_email");
  sa.private_key = text(j, "private_key");
  sa.private_key_id = text(j, "private_key_id");
  sa.project_id = text(j, "project_id");
  if (const std::string uri = text(j, "token_uri"); !uri.empty()) sa.token_uri = uri;
  if (sa.client_email.empty() || sa.private_key.empty())
    return std::string("the service account key has no client_email or private_key");
  return sa;
}

std::string google_jwt_assertion(const ServiceAccount& sa, std::string_view scope,
                                 SystemClock::time_point now, std::string* error) {
  json header = {{"alg", "RS256"}, {"typ", "JWT"}};
  if (!sa.private_key_id.empty()) header["kid"] = sa.private_key_id;
  const std::int64_t iat = unix_seconds(now);
  const json claims = {{"iss", sa.client_email},
                       {"sub", sa.client_email},
                       {"aud", sa.token_uri},
                       {"scope", std::string(scope)},
                       {"iat", iat},
                       {"exp", iat + 3600}};
  const std::string signing_input = base64url(dump(header)) + "." + base64url(dump(claims));
  const std::string sig = rs256(sa.private_key, signing_input, error);
  if (sig.empty()) return {};
  return signing_input + "." + base64url(sig);
}

TokenRequest google_token_request(const ServiceAccount& sa, std::string_view assertion) {
  return {sa.token_uri, form({{"grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"},
                              {"assertion", assertion}})};
}

TokenRequest entra_client_secret_request(std::string_view authority, std::string_view tenant,
                                         std::string_view client_id, std::string_view secret,
                                         std::string_view scope) {
  return {std::string(authority) + "/" + std::string(tenant) + "/oauth2/v2.0/token",
          form({{"grant_type", "client_credentials"},
                {"client_id", client_id},
                {"client_secret", secret},
                {"scope", scope}})};
}

TokenRequest entra_federated_request(std::string_view authority, std::string_view tenant,
                                     std::string_view client_id, std::string_view federated_token,
                                     std::string_view scope) {
  return {std::string(authority) + "/" + std::string(tenant) + "/oauth2/v2.0/token",
          form({{"grant_type", "client_credentials"},
                {"client_id", client_id},
                {"client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"},
                {"client_assertion", federated_token},
                {"scope", scope}})};
}

std::variant<AccessToken, std::string> parse_token_response(int status, std::string_view body,
                                                            SystemClock::time_point now) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    return "the token endpoint answered " + std::to_string(status) + " without a JSON object";
  }
  if (status != 200 || j.contains("error")) {
    const json& e = j.contains("error") ? j["error"] : json();
    std::string why =
        e.is_string() ? e.get<std::string>() : std::string("HTTP ") + std::to_string(status);
    if (const auto d = j.find("error_description"); d != j.end() && d->is_string())
      why += ": " + d->get<std::string>().substr(0, 300);
    return "the token endpoint refused: " + why;
  }
  const auto token = j.find("access_token");
  const auto expires_in = j.find("expires_in");
  if (token == j.end() || !token->is_string() || token->get_ref<const std::string&>().empty())
    return std::string("the token endpoint's answer has no access_token");
  // Entra has sent expires_in as a string.
  std::int64_t seconds = 3600;
  if (expires_in != j.end()) {
    if (expires_in->is_number_integer()) {
      seconds = expires_in->get<std::int64_t>();
    } else if (expires_in->is_string()) {
      try {
        seconds = std::stoll(expires_in->get<std::string>());
      } catch (const std::exception&) {
        return std::string("the token endpoint's expires_in is not a number");
      }
    }
  }
  if (seconds <= 0) return std::string("the token endpoint's token has already expired");
  // Whatever it says, a token is asked for again within a day.
  seconds = std::min<std::int64_t>(seconds, 86400);
  return AccessToken{token->get<std::string>(), now + std::chrono::seconds(seconds)};
}

TokenRequest sts_web_identity_request(std::string_view region, std::string_view role_arn,
                                      std::string_view session_name,
                                      std::string_view web_identity_token) {
  const std::string host = region.empty() ? std::string("sts.amazonaws.com")
                                          : "sts." + std::string(region) + ".amazonaws.com";
  return {"https://" + host + "/", form({{"Action", "AssumeRoleWithWebIdentity"},
                                         {"Version", "2011-06-15"},
                                         {"RoleArn", role_arn},
                                         {"RoleSessionName", session_name},
                                         {"WebIdentityToken", web_identity_token}})};
}

std::variant<AwsCredentials, std::string> parse_sts_response(int status, std::string_view body) {
  if (status != 200) {
    const auto code = xml_text(body, "Code");
    const auto message = xml_text(body, "Message");
    return "STS refused (HTTP " + std::to_string(status) + ")" + (code ? ": " + *code : "") +
           (message ? ": " + message->substr(0, 300) : "");
  }
  AwsCredentials c;
  c.access_key_id = xml_text(body, "AccessKeyId").value_or("");
  c.secret_access_key = xml_text(body, "SecretAccessKey").value_or("");
  c.session_token = xml_text(body, "SessionToken").value_or("");
  const auto expiration = xml_text(body, "Expiration");
  const auto expires = expiration ? config::parse_rfc3339_utc(*expiration) : std::nullopt;
  if (!c.valid() || c.session_token.empty() || !expires)
    return std::string("STS's answer has no complete credentials");
  c.expires = *expires;
  return c;
}

std::variant<AwsCredentials, std::string> parse_container_credentials(int status,
                                                                      std::string_view body) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (status != 200) {
    std::string why = "the container credentials endpoint answered " + std::to_string(status);
    if (j.is_object()) {
      const std::string message = text(j, "message");
      if (!message.empty()) why += ": " + message.substr(0, 300);
    }
    return why;
  }
  if (!j.is_object())
    return std::string("the container credentials endpoint's answer is no JSON object");
  AwsCredentials c;
  c.access_key_id = text(j, "AccessKeyId");
  c.secret_access_key = text(j, "SecretAccessKey");
  c.session_token = text(j, "Token");
  const auto expires = config::parse_rfc3339_utc(text(j, "Expiration"));
  if (!c.valid() || !expires)
    return std::string("the container credentials endpoint's answer has no complete credentials");
  c.expires = *expires;
  return c;
}

}  // namespace llmgate::providers::cloud
