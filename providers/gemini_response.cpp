#include "providers/gemini_response.h"

#include "providers/json_scan.h"

namespace llmgate::providers::gemini {
namespace {

// A usual response read in one pass. Each object's members are read where
// they stand (a container's depth counted as JsonScanner::value counts it);
// anything the document's reading would answer differently, or that is not
// worth reading here, is a `false`: declined.
class UsualScanner : public JsonScanner {
 public:
  UsualScanner(std::string_view text, UsualResponse& out) : JsonScanner(text), out_(out) {}

  bool scan() {
    if (!open_object()) return false;
    unsigned seen = 0;
    bool has_candidates = false;
    const bool read = members<true>(1, [&](std::string_view key) {
      if (is(key, "candidates")) {
        if (!once(seen, 1)) return false;
        if (at_null()) return skip(1);
        has_candidates = true;
        return eat('[') && candidates(2);
      }
      if (is(key, "usageMetadata")) {
        if (!once(seen, 2)) return false;
        if (at_null()) return skip(1);
        out_.usage.emplace();
        return eat('{') && usage(2);
      }
      // An error, or feedback that may say the prompt was blocked: the
      // document's reading answers (null reads as absent).
      if (is(key, "error") || is(key, "promptFeedback")) return at_null() && skip(1);
      return skip(1);  // modelVersion, responseId: fixed by the stream's first response
    });
    if (!read) return false;
    ws();
    // Without candidates it is a response only for its usage.
    return at_end() && (has_candidates || out_.usage);
  }

 private:
  // The array's first element is the candidate read; the rest are passed.
  bool candidates(int depth) {
    bool first = true;
    return elements(depth,
                    [&] {
                      if (!first) return skip(depth);
                      first = false;
                      return eat('{') && candidate(depth + 1);
                    }) &&
           !first;  // an empty array: declined
  }

  bool candidate(int depth) {
    unsigned seen = 0;
    return members<true>(depth, [&](std::string_view key) {
      if (is(key, "content")) {
        if (!once(seen, 1)) return false;
        if (at_null()) return skip(depth);
        return eat('{') && content(depth + 1);
      }
      if (is(key, "finishReason")) {
        if (!once(seen, 2)) return false;
        const char* const at = p_;
        Value v;
        if (!value(depth, v)) return false;
        if (v.type != Value::Type::kString) return true;  // not a reason: none
        if (v.escaped) return false;
        out_.finish_reason = inner(at);
        return true;
      }
      return skip(depth);
    });
  }

  bool content(int depth) {
    unsigned seen = 0;
    return members<true>(depth, [&](std::string_view key) {
      if (!is(key, "parts")) return skip(depth);  // role
      if (!once(seen, 1)) return false;
      if (at_null()) return skip(depth);
      return eat('[') && elements(depth + 1, [&] { return eat('{') && part(depth + 2); });
    });
  }

  // A text part, or a thought; any other (a function call) is declined.
  bool part(int depth) {
    unsigned seen = 0;
    std::string_view text;
    bool has_text = false, thought = false;
    const bool read = members<true>(depth, [&](std::string_view key) {
      const bool is_text = is(key, "text");
      if (is_text || is(key, "thought")) {
        if (!once(seen, is_text ? 1 : 2)) return false;
        const char* const at = p_;
        Value v;
        if (!value(depth, v)) return false;
        if (!is_text) {
          thought = v.type == Value::Type::kTrue;
          return true;
        }
        if (v.type == Value::Type::kNull) return true;
        if (v.type != Value::Type::kString) return false;
        has_text = true;
        text = inner(at);
        return true;
      }
      if (is(key, "functionCall")) return at_null() && skip(depth);
      return skip(depth);  // thoughtSignature
    });
    if (!read) return false;
    if (has_text) (thought ? out_.reasoning : out_.content).append(text);
    return true;
  }

  bool usage(int depth) {
    unsigned seen = 0;
    Usage& u = *out_.usage;
    return members<true>(depth, [&](std::string_view key) {
      std::optional<std::int64_t>* count = nullptr;
      unsigned bit = 0;
      if (is(key, "promptTokenCount")) {
        count = &u.prompt, bit = 1;
      } else if (is(key, "candidatesTokenCount")) {
        count = &u.candidates, bit = 2;
      } else if (is(key, "thoughtsTokenCount")) {
        count = &u.thoughts, bit = 4;
      } else if (is(key, "cachedContentTokenCount")) {
        count = &u.cached, bit = 8;
      } else {
        return skip(depth);  // totalTokenCount, trafficType, the details
      }
      if (!once(seen, bit)) return false;
      Value v;
      if (!value(depth, v)) return false;
      if (const auto n = v.as_int64(); n && *n >= 0 && *n <= kMaxCount) *count = *n;
      return true;
    });
  }

  UsualResponse& out_;
};

}  // namespace

bool read_usual(std::string_view data, UsualResponse& out) {
  out.clear();
  return UsualScanner(data, out).scan();
}

}  // namespace llmgate::providers::gemini
