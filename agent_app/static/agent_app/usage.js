/**
 * Token usage as the server reports it (`zett_agent.serialization.usage_to_dict`):
 * `input_tokens`, `output_tokens`, `reasoning_tokens`, `cache_read_tokens`,
 * `cache_write_tokens`, `total_tokens`. Any of them may be missing; a usage of nothing
 * (e.g. from a model that reports none) is not shown at all.
 */

const FIELDS = ["input_tokens", "output_tokens", "reasoning_tokens", "cache_read_tokens", "cache_write_tokens"];
const number = new Intl.NumberFormat(document.documentElement.lang || "en");

function count(value) {
  return Number.isFinite(value) && value > 0 ? value : 0;
}

/** A usage with every field a count (0 where missing), or null for no usage object. */
export function normaliseUsage(usage) {
  if (!usage || typeof usage !== "object") {
    return null;
  }
  const result = {};
  for (const field of FIELDS) {
    result[field] = count(usage[field]);
  }
  result.total_tokens = count(usage.total_tokens) || result.input_tokens + result.output_tokens;
  return result;
}

/** The sum of two usages, either of which may be null. */
export function addUsage(a, b) {
  const left = normaliseUsage(a);
  const right = normaliseUsage(b);
  if (!left || !right) {
    return left ?? right;
  }
  const sum = {};
  for (const field of [...FIELDS, "total_tokens"]) {
    sum[field] = left[field] + right[field];
  }
  return sum;
}

/** "1,234 tokens", or "" when there is nothing to show. */
export function usageText(usage) {
  const total = normaliseUsage(usage)?.total_tokens ?? 0;
  if (total === 0) {
    return "";
  }
  return `${number.format(total)} ${total === 1 ? "token" : "tokens"}`;
}

/** "1,000 in, 234 out" (plus reasoning and cache counts when there are any). */
export function usageDetail(usage) {
  const u = normaliseUsage(usage);
  if (!u) {
    return "";
  }
  const parts = [`${number.format(u.input_tokens)} in`, `${number.format(u.output_tokens)} out`];
  if (u.reasoning_tokens) {
    parts.push(`${number.format(u.reasoning_tokens)} reasoning`);
  }
  if (u.cache_read_tokens) {
    parts.push(`${number.format(u.cache_read_tokens)} read from cache`);
  }
  if (u.cache_write_tokens) {
    parts.push(`${number.format(u.cache_write_tokens)} written to cache`);
  }
  return parts.join(", ");
}
