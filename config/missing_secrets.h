// llmgate --check-config without the secrets (config.h's readers consult
// it). Beast-free.
#pragma once

#include <string>
#include <vector>

namespace llmgate::config {

// While one exists on this thread, a secret whose environment variable
// (api_key_env, headers' env, ...) is not set reads as a stand-in instead
// of failing, and the variable is listed here: llmgate --check-config, run
// where the secrets are not (a CI pipeline), checks the rest of the file.
class MissingSecrets {
 public:
  MissingSecrets();
  ~MissingSecrets();
  MissingSecrets(const MissingSecrets&) = delete;
  MissingSecrets& operator=(const MissingSecrets&) = delete;
  const std::vector<std::string>& names() const { return names_; }
  // The one in effect on this thread, or null.
  static MissingSecrets* current();
  void add(const std::string& name);

 private:
  std::vector<std::string> names_;
  MissingSecrets* previous_;
};

}  // namespace llmgate::config
